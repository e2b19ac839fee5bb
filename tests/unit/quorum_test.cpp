// QuorumLock without servers: bad input is refused before any connection
// (fewer than 3 nodes, a node given twice under another spelling, a bad
// drift factor or node timeout, a lease too short for the node timeout),
// and a quorum over three file:// stores — a quorum is not Redis-only —
// excludes a second quorum client and hands over with a larger token.
#include <dlock/dlock.h>

#include "unit_support.h"

#include <thread>

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::TempDir;
using test::thrown_code;
using ::testing::HasSubstr;

std::string refused_urls(const std::vector<std::string>& urls, QuorumOptions quorum = {}) {
  std::string message;
  EXPECT_EQ(thrown_code([&] { (void)connect_quorum(urls, quorum); }, &message), errc::invalid_argument);
  EXPECT_EQ(connect_quorum_checked(urls, quorum).code(), errc::invalid_argument);
  return message;
}

std::string refused(const std::string& url) {
  std::string message;
  EXPECT_EQ(thrown_code([&] { (void)connect(url); }, &message), errc::invalid_argument) << url;
  return message;
}

TEST(Quorum, RefusesFewerThanThreeNodes) {
  TempDir a, b;
  EXPECT_THAT(refused_urls({a.url(), b.url()}), HasSubstr("at least 3 nodes (got 2)"));
  EXPECT_THAT(refused_urls({}), HasSubstr("at least 3 nodes (got 0)"));
  auto one = connect(a.url()), two = connect(b.url());
  std::string message;
  EXPECT_EQ(thrown_code([&] { (void)connect_quorum({one, two}); }, &message), errc::invalid_argument);
  EXPECT_THAT(message, HasSubstr("at least 3 nodes"));
}

TEST(Quorum, RefusesANodeGivenTwice) {
  TempDir a, b;
  EXPECT_THAT(refused_urls({a.url(), b.url(), a.url()}), HasSubstr("node 3"));
  EXPECT_THAT(refused_urls({a.url(), b.url(), a.url()}), HasSubstr("same store as node 1"));
  auto one = connect(a.url()), two = connect(b.url());
  std::string message;
  EXPECT_EQ(thrown_code([&] { (void)connect_quorum({one, two, one}); }, &message), errc::invalid_argument);
  EXPECT_THAT(message, HasSubstr("same store as node 1"));
}

TEST(Quorum, RefusesBadOptionsNaming) {
  TempDir a, b, c;
  const std::vector<std::string> urls{a.url(), b.url(), c.url()};
  EXPECT_THAT(refused_urls(urls, {.drift_factor = -0.1}), HasSubstr("drift_factor: must be in [0, 1)"));
  EXPECT_THAT(refused_urls(urls, {.drift_factor = 1.0}), HasSubstr("drift_factor"));
  EXPECT_THAT(refused_urls(urls, {.drift_factor = std::nan("")}), HasSubstr("drift_factor"));
  EXPECT_THAT(refused_urls(urls, {.node_timeout = 0ms}), HasSubstr("node_timeout: must be > 0"));
  // Nothing was made in the stores.
  EXPECT_EQ(a.entries() + b.entries() + c.entries(), 0u);
}

TEST(Quorum, RefusesALeaseShorterThanTheNodeTimeoutAllows) {
  TempDir a, b, c;
  auto quorum = connect_quorum({a.url(), b.url(), c.url()}, {.node_timeout = 100ms, .drift_factor = 0.01});
  std::string message;
  EXPECT_EQ(thrown_code([&] { (void)quorum->mutex("m", {.lease = 100ms}); }, &message), errc::invalid_argument);
  EXPECT_THAT(message, HasSubstr("MutexOptions::lease: 100ms is too short for this quorum"));
  EXPECT_THAT(message, HasSubstr("node_timeout (100ms)"));
  EXPECT_NO_THROW((void)quorum->mutex("m", {.lease = 1s}));
  EXPECT_EQ(thrown_code([&] { (void)quorum->mutex("m", {.fair = true}); }), errc::unsupported);
}

#ifdef DLOCK_WITH_REDIS
// redlock:// is checked before any server is asked (no server listens on these ports).
TEST(RedlockUrl, RefusesBadInputBeforeConnecting) {
  EXPECT_THAT(refused("redlock://127.0.0.1:1,127.0.0.1:2"), HasSubstr("at least 3 hosts (got 2)"));
  EXPECT_THAT(refused("redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:1"), HasSubstr("same store as node 1"));
  // One node under two spellings: a name and its address, an explicit default port.
  EXPECT_THAT(refused("redlock://localhost:7,127.0.0.1:8,127.0.0.1:7"), HasSubstr("node 3"));
  EXPECT_THAT(refused("redlock://127.0.0.1,127.0.0.1:2,127.0.0.1:6379"), HasSubstr("same store as node 1"));
  EXPECT_THAT(refused("redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?drift_factor=1.5"),
              HasSubstr("drift_factor: must be in [0, 1) (got 1.5"));
  EXPECT_THAT(refused("redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?drift_factor=abc"),
              HasSubstr("drift_factor 'abc' is not a number"));
  EXPECT_THAT(refused("redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?node_timeout=0"),
              HasSubstr("node_timeout: must be > 0"));
  EXPECT_THAT(refused("redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?colour=red"), HasSubstr("unknown option 'colour'"));
  // The password stays out of the message.
  EXPECT_THAT(refused("redlock://u:hunter2@127.0.0.1:1,127.0.0.1:2"), ::testing::Not(HasSubstr("hunter2")));
}

TEST(RedlockUrl, NoMajorityReachableIsUnavailableWithinTheTimeout) {
  const auto start = std::chrono::steady_clock::now();
  std::string message;
  // Refused connections are tried again until op_timeout, then reported.
  EXPECT_EQ(thrown_code([&] {
              (void)connect("redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?node_timeout=100ms", {.op_timeout = 500ms});
            },
                        &message),
            errc::unavailable);
  EXPECT_THAT(message, HasSubstr("only 0 of 3 nodes answered"));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 500ms);
  EXPECT_LT(std::chrono::steady_clock::now() - start, test::scaled(3s));
}
#endif

TEST(Quorum, OverFileStoresExcludesASecondQuorumClient) {
  TempDir a, b, c;
  const std::vector<std::string> urls{a.url(), b.url(), c.url()};
  auto first = connect_quorum(urls), second = connect_quorum(urls);
  auto m1 = first->mutex("orders"), m2 = second->mutex("orders");
  ASSERT_TRUE(m1.try_lock());
  const auto token = m1.token();
  std::thread([&] { EXPECT_FALSE(m2.try_lock()); }).join();
  m1.unlock();
  std::thread([&] {
    ASSERT_TRUE(m2.try_lock_for(test::scaled(2s)));
    EXPECT_GT(m2.token(), token);
    m2.unlock();
  }).join();
}

}  // namespace
}  // namespace dlock
