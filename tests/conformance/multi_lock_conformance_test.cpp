// MultiLock conformance: every backend (a MultiLock is core over Mutex).
// Each test states a guarantee of multi_lock.h.
#include "conformance_fixture.h"
#include "fenced_resource.h"
#include "thrown.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

class MultiLockConformance : public ConformanceFixture {
 protected:
  static std::string name(const std::string& suffix) { return name_in("multi") + "/" + suffix; }
};

// Whether another client can take `name` right now (and lets it go again).
bool free_now(const std::shared_ptr<Client>& other, const std::string& name) {
  auto m = other->mutex(name);
  if (!m.try_lock()) return false;
  m.unlock();
  return true;
}

TEST_P(MultiLockConformance, AllOrNothing) {
  auto mine = client();
  auto other = client();
  auto b = other->mutex(name("b"));
  b.lock();
  auto set = mine->multi_lock({name("c"), name("a"), name("b")});
  EXPECT_EQ(set.names(), (std::vector<std::string>{name("a"), name("b"), name("c")}));
  EXPECT_FALSE(set.try_lock());
  EXPECT_FALSE(set.try_lock_for(200ms));
  EXPECT_FALSE(set.held_by_current_thread());
  // What it took before it met "b" was given back.
  EXPECT_TRUE(free_now(other, name("a"))) << "a failed multi-lock kept 'a'";
  EXPECT_TRUE(free_now(other, name("c")));
  b.unlock();
  ASSERT_TRUE(set.try_lock_for(scaled(10s)));
  EXPECT_TRUE(set.held_by_current_thread());
  EXPECT_FALSE(free_now(other, name("a")));
  EXPECT_FALSE(free_now(other, name("b")));
  EXPECT_FALSE(free_now(other, name("c")));
  const auto tokens = set.tokens();
  ASSERT_EQ(tokens.size(), 3u);
  EXPECT_EQ(tokens[1], mine->mutex(name("b")).token());
  EXPECT_TRUE(set.unlock_checked().ok());
  EXPECT_TRUE(free_now(other, name("a")));
  EXPECT_TRUE(free_now(other, name("b")));
  EXPECT_TRUE(free_now(other, name("c")));
  EXPECT_EQ(set.unlock_checked().code(), errc::not_owner);
  EXPECT_EQ(thrown([&] { (void)set.tokens(); }), errc::not_owner);
}

// Two clients listing the same locks in opposite orders never deadlock,
// and each section has both locks to itself.
TEST_P(MultiLockConformance, OppositeOrdersNeverDeadlock) {
  constexpr int rounds = 25;
  std::atomic<int> inside{0}, overlaps{0}, timeouts{0};
  auto run = [&](std::vector<std::string> names) {
    auto c = client();
    auto set = c->multi_lock(std::move(names));
    for (int i = 0; i < rounds; ++i) {
      if (!set.try_lock_for(scaled(20s))) {
        ++timeouts;
        return;
      }
      if (++inside != 1) ++overlaps;
      std::this_thread::sleep_for(1ms);
      --inside;
      set.unlock();
    }
  };
  std::thread one(run, std::vector<std::string>{name("x"), name("y")});
  std::thread two(run, std::vector<std::string>{name("y"), name("x")});
  one.join();
  two.join();
  EXPECT_EQ(timeouts.load(), 0) << "opposite orders waited for each other";
  EXPECT_EQ(overlaps.load(), 0);
}

TEST_P(MultiLockConformance, LostWhenAnyLeaseIsLost) {
  auto c = client();
  auto set = c->multi_lock({name("p"), name("q")}, {.lease = 300ms, .lease_mode = LeaseMode::fixed});
  set.lock();
  EXPECT_FALSE(set.lost());
  auto stop = set.stop_token();
  EXPECT_FALSE(stop.stop_requested());
  const auto until = steady::now() + scaled(10s);
  while (!stop.stop_requested() && steady::now() < until) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(stop.stop_requested()) << "the set's stop_token was not signalled when its leases ran out";
  EXPECT_TRUE(set.lost());
  EXPECT_EQ(set.unlock_checked().code(), errc::lock_lost);
  EXPECT_FALSE(set.held_by_current_thread());
}

TEST_P(MultiLockConformance, BadNamesAreRefused) {
  auto c = client();
  EXPECT_EQ(thrown([&] { (void)c->multi_lock({}); }), errc::invalid_argument);
  EXPECT_EQ(thrown([&] { (void)c->multi_lock({name("a"), name("a")}); }), errc::invalid_argument);
  EXPECT_EQ(thrown([&] { (void)c->multi_lock({name("a"), ""}); }), errc::invalid_argument);
  EXPECT_EQ(thrown([&] { (void)c->multi_lock({name("a")}, {.lease = 0ms}); }), errc::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(Backends, MultiLockConformance, ::testing::ValuesIn(backends_under_test()),
                         [](const auto& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace dlock::test
