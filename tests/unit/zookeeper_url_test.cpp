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
  test::never_echoes_the_password("zk://alice:s3cret@127.0.0.1:1/a//b", "zk://alice:s3cret@127.0.0.1:1");
}

TEST(ZooKeeperUrl, UnreachableEnsembleFailsWithinTheTimeout) {
  const std::string message = test::unavailable_within("zk://127.0.0.1:1,127.0.0.1:2", std::chrono::milliseconds(500),
                                                       std::chrono::milliseconds(1500));
  EXPECT_THAT(message, HasSubstr("no server answered"));
}

}  // namespace
}  // namespace dlock
