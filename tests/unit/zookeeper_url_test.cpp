// The zk:// URL checks: refused with invalid_argument and a message naming
// the problem, before any connection is attempted (no server is running).
#include <dlock/dlock.h>

#include "unit_support.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dlock {
namespace {

using test::refused;
using test::thrown_code;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(ZooKeeperUrl, RefusesBadRootPaths) {
  EXPECT_THAT(refused("zk://127.0.0.1:1/a//b"), HasSubstr("empty segment"));
  EXPECT_THAT(refused("zk://127.0.0.1:1/a/../b"), HasSubstr("'..'"));
  EXPECT_THAT(refused("zk://127.0.0.1:1/a/./b"), HasSubstr("'.'"));
  EXPECT_THAT(refused("zk://127.0.0.1:1/locks/"), HasSubstr("must not end in '/'"));
  EXPECT_THAT(refused("zk://127.0.0.1:1/zookeeper/x"), HasSubstr("/zookeeper"));
  EXPECT_THAT(refused("zk://127.0.0.1:1/a%EE%80%80b"), HasSubstr("ZooKeeper refuses"));  // U+E000, private use
}

TEST(ZooKeeperUrl, RefusesSessionTimeoutsOutOfRange) {
  EXPECT_THAT(refused("zk://127.0.0.1:1?session_timeout=500ms"), HasSubstr("session_timeout '500ms' must be from 1s"));
  EXPECT_THAT(refused("zk://127.0.0.1:1?session_timeout=11m"), HasSubstr("session_timeout"));
  EXPECT_THAT(refused("zk://127.0.0.1:1?session_timeout=soon"), HasSubstr("session_timeout"));
}

TEST(ZooKeeperUrl, RefusesUnknownOptionsAndHalfCredentials) {
  EXPECT_THAT(refused("zk://127.0.0.1:1?sesion_timeout=2s"), HasSubstr("unknown option 'sesion_timeout'"));
  EXPECT_THAT(refused("zk://127.0.0.1:1?lost_on=never"), HasSubstr("lost_on 'never'"));
  EXPECT_THAT(refused("zk://alice@127.0.0.1:1"), HasSubstr("both a user and a password"));
  EXPECT_THAT(refused("zk://"), HasSubstr("host"));
}

TEST(ZooKeeperUrl, NeverEchoesThePassword) {
  EXPECT_THAT(refused("zk://alice:s3cret@127.0.0.1:1/a//b"), Not(HasSubstr("s3cret")));
  std::string message;
  // Unreachable: unavailable, with the password redacted too.
  EXPECT_EQ(thrown_code([&] { (void)connect("zk://alice:s3cret@127.0.0.1:1", {.op_timeout = std::chrono::milliseconds(300)}); },
                        &message),
            errc::unavailable);
  EXPECT_THAT(message, Not(HasSubstr("s3cret")));
  EXPECT_THAT(message, HasSubstr("***"));
}

TEST(ZooKeeperUrl, UnreachableEnsembleFailsWithinTheTimeout) {
  const auto start = std::chrono::steady_clock::now();
  std::string message;
  EXPECT_EQ(thrown_code([&] { (void)connect("zk://127.0.0.1:1,127.0.0.1:2", {.op_timeout = std::chrono::milliseconds(500)}); },
                        &message),
            errc::unavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - start, test::scaled(std::chrono::milliseconds(1500)));
  EXPECT_THAT(message, HasSubstr("no server answered"));
}

}  // namespace
}  // namespace dlock
