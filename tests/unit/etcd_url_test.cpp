// The etcd:// URL checks: refused with invalid_argument and a message naming
// the problem, before any connection is attempted (no server is running);
// an unreachable cluster is unavailable within the timeout.
#include <dlock/dlock.h>

#include "unit_support.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dlock {
namespace {

using test::thrown_code;
using ::testing::HasSubstr;
using ::testing::Not;

std::string refused(const std::string& url) {
  std::string message;
  EXPECT_EQ(thrown_code([&] { (void)connect(url, {.op_timeout = std::chrono::milliseconds(200)}); }, &message),
            errc::invalid_argument)
      << url;
  return message;
}

TEST(EtcdUrl, RefusesPrefixesWithEmptyOrRelativeSegments) {
  EXPECT_THAT(refused("etcd://127.0.0.1:1/a//b"), HasSubstr("empty segment"));
  EXPECT_THAT(refused("etcd://127.0.0.1:1//a"), HasSubstr("empty segment"));
  EXPECT_THAT(refused("etcd://127.0.0.1:1/a/../b"), HasSubstr("'..'"));
  EXPECT_THAT(refused("etcd://127.0.0.1:1/a/./b"), HasSubstr("'.'"));
  EXPECT_THAT(refused("etcd://127.0.0.1:1/locks/"), HasSubstr("must not end in '/'"));
}

TEST(EtcdUrl, RefusesLeaseTtlsOutOfRange) {
  EXPECT_THAT(refused("etcd://127.0.0.1:1?ttl=1s"), HasSubstr("ttl '1s' must be from"));
  EXPECT_THAT(refused("etcd://127.0.0.1:1?ttl=2h"), HasSubstr("ttl '2h'"));
  EXPECT_THAT(refused("etcd://127.0.0.1:1?ttl=2500ms"), HasSubstr("whole seconds"));
  EXPECT_THAT(refused("etcd://127.0.0.1:1?ttl=soon"), HasSubstr("ttl"));
}

TEST(EtcdUrl, RefusesUnknownOptionsAndHalfCredentials) {
  EXPECT_THAT(refused("etcd://127.0.0.1:1?tll=2s"), HasSubstr("unknown option 'tll'"));
  EXPECT_THAT(refused("etcd://alice@127.0.0.1:1"), HasSubstr("both a user and a password"));
  EXPECT_THAT(refused("etcd://"), HasSubstr("host"));
}

TEST(EtcdUrl, NeverEchoesThePassword) {
  EXPECT_THAT(refused("etcd://alice:s3cret@127.0.0.1:1/a//b"), Not(HasSubstr("s3cret")));
  std::string message;
  EXPECT_EQ(thrown_code([&] { (void)connect("etcd://alice:s3cret@127.0.0.1:1", {.op_timeout = std::chrono::milliseconds(300)}); },
                        &message),
            errc::unavailable);
  EXPECT_THAT(message, Not(HasSubstr("s3cret")));
  EXPECT_THAT(message, HasSubstr("***"));
}

TEST(EtcdUrl, UnreachableClusterFailsWithinTheTimeout) {
  const auto start = std::chrono::steady_clock::now();
  std::string message;
  EXPECT_EQ(thrown_code([&] { (void)connect("etcd://127.0.0.1:1,127.0.0.1:2", {.op_timeout = std::chrono::milliseconds(400)}); },
                        &message),
            errc::unavailable);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, test::scaled(std::chrono::milliseconds(1400)));
  EXPECT_THAT(message, HasSubstr("127.0.0.1:1"));
}

}  // namespace
}  // namespace dlock
