// Names are independent (docs/reliability.md): on every backend and for every
// primitive it has, a lock's name never reaches another's. The names are
// the ones a store's layout is most likely to confuse: a name and the names
// below it ('a', 'a/b', 'a/b/c': a key range or a directory that holds the
// others), a space, an escape a store might use itself ('a%2Fb' next to
// 'a/b'), and a dot (a separator some layouts use between a name and a
// kind). Holding, waiting, counting, electing, force-releasing or listing
// one of them never touches another.
#include "conformance_fixture.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;

const std::vector<std::string>& names() {
  static const std::vector<std::string> all{"a", "a/b", "a/b/c", "a b", "a%2Fb", "a.b"};
  return all;
}

// The other names, with `name`'s index left out.
std::vector<std::string> others(const std::string& name) {
  std::vector<std::string> out;
  for (const auto& n : names())
    if (n != name) out.push_back(n);
  return out;
}

class NameIndependence : public ConformanceFixture {
 protected:
  // How long a lock that should be free may take to be taken: unlock()
  // sends the release and returns on most stores (another client may find
  // the lock still held for a round trip), and a quorum's try_lock() may
  // miss a node slow to answer on a loaded machine. A free lock is taken at
  // once anyway, and one held by another name's holder stays held.
  static std::chrono::milliseconds free_within() { return scaled(2s); }
};

// Suites of one primitive: on the backends that have it.
class SharedNameIndependence : public NameIndependence {};
class SemaphoreNameIndependence : public NameIndependence {};
class CounterNameIndependence : public NameIndependence {};
class ElectionNameIndependence : public NameIndependence {};
class BarrierNameIndependence : public NameIndependence {};

TEST_P(NameIndependence, HoldingOneMutexLeavesEveryOtherNameFree) {
  auto holder = client(), taker = client();
  for (const auto& x : names()) {
    auto held = holder->mutex(x);
    ASSERT_TRUE(held.try_lock_for(free_within())) << "'" << x << "' was not free";
    for (const auto& y : others(x)) {
      auto other = taker->mutex(y);
      EXPECT_TRUE(other.try_lock_for(free_within())) << "holding '" << x << "' kept '" << y << "' from being taken";
      if (other.held_by_current_thread()) other.unlock();
    }
    held.unlock();
  }
}

// A waiter's entry in a store's queue blocks no other name, and no other
// name's release hands it the lock.
TEST_P(NameIndependence, AWaiterIsNeitherBlockingNorWokenByAnotherName) {
  auto holder = client(), waiter = client(), taker = client();
  for (const auto& x : names()) {
    auto held = holder->mutex(x);
    ASSERT_TRUE(held.try_lock_for(free_within())) << "'" << x << "' was not free";
    auto waiting = std::async(std::launch::async, [&] {
      auto m = waiter->mutex(x);
      const bool got = m.try_lock_for(scaled(20s));
      if (got) m.unlock();
      return got;
    });
    std::this_thread::sleep_for(300ms);  // the waiter queues (a store that polls: it polls)
    std::vector<std::unique_ptr<Mutex>> taken;
    for (const auto& y : others(x)) {
      taken.push_back(std::make_unique<Mutex>(taker->mutex(y)));
      EXPECT_TRUE(taken.back()->try_lock_for(free_within())) << "a waiter for '" << x << "' kept '" << y << "' from being taken";
    }
    for (auto& m : taken)
      if (m->held_by_current_thread()) m->unlock();
    EXPECT_EQ(waiting.wait_for(500ms), std::future_status::timeout)
        << "the waiter for '" << x << "' got it while it was held (after other names were released)";
    held.unlock();
    ASSERT_EQ(waiting.wait_for(scaled(10s)), std::future_status::ready) << "the waiter for '" << x << "' never got it";
    EXPECT_TRUE(waiting.get());
  }
}

TEST_P(NameIndependence, ForceUnlockingOneNameLeavesTheOthersHeld) {
  auto holder = client(), admin = client(), taker = client();
  for (const auto& x : names()) {
    // The others first: on a store that orders a name's holders by creation,
    // they come before x's.
    std::vector<std::unique_ptr<Mutex>> held;
    for (const auto& y : others(x)) {
      held.push_back(std::make_unique<Mutex>(holder->mutex(y)));
      ASSERT_TRUE(held.back()->try_lock_for(free_within())) << "'" << y << "' was not free";
    }
    auto target = holder->mutex(x);
    ASSERT_TRUE(target.try_lock_for(free_within())) << "'" << x << "' was not free";
    admin->mutex(x).force_unlock();
    auto freed = taker->mutex(x);
    EXPECT_TRUE(freed.try_lock_for(free_within())) << "force-unlocking '" << x << "' did not free it";
    if (freed.held_by_current_thread()) freed.unlock();
    for (std::size_t i = 0; i < held.size(); ++i) {
      const std::string& y = held[i]->name();
      auto other = taker->mutex(y);
      EXPECT_FALSE(other.try_lock()) << "force-unlocking '" << x << "' freed '" << y << "'";
      if (other.held_by_current_thread()) other.unlock();
      EXPECT_TRUE(held[i]->unlock_checked().ok()) << "force-unlocking '" << x << "' took '" << y << "' from its holder";
    }
    target.unlock();
  }
}

TEST_P(NameIndependence, ListingAPrefixShowsExactlyTheNamesThatStartWithIt) {
  auto holder = client();
  std::vector<std::unique_ptr<Mutex>> held;
  for (const auto& n : names()) {
    held.push_back(std::make_unique<Mutex>(holder->mutex(n)));
    ASSERT_TRUE(held.back()->try_lock_for(free_within())) << "'" << n << "' was not free";
  }
  for (const std::string prefix : {"", "a", "a/", "a/b", "a/b/", "a/b/c", "a%", "a%2F", "a.", "a ", "b"}) {
    std::vector<std::string> expected, listed;
    for (const auto& n : names())
      if (n.starts_with(prefix)) expected.push_back(n);
    for (const auto& info : holder->list_locks(prefix)) listed.push_back(info.name);
    std::sort(expected.begin(), expected.end());
    std::sort(listed.begin(), listed.end());
    EXPECT_EQ(listed, expected) << "list_locks('" << prefix << "')";
  }
  for (auto& m : held) m->unlock();
}

TEST_P(SharedNameIndependence, SharedMutexesOfOtherNamesAreOtherLocks) {
  auto holder = client(), taker = client();
  for (const auto& x : names()) {
    auto held = holder->shared_mutex(x);
    ASSERT_TRUE(held.try_lock_for(free_within())) << "'" << x << "' was not free";
    for (const auto& y : others(x)) {
      auto other = taker->shared_mutex(y);
      EXPECT_TRUE(other.try_lock_shared()) << "a writer of '" << x << "' kept a reader of '" << y << "' out";
      other.unlock_shared();
      EXPECT_TRUE(other.try_lock_for(free_within())) << "a writer of '" << x << "' kept a writer of '" << y << "' out";
      other.unlock();
    }
    held.unlock();
    ASSERT_TRUE(held.try_lock_shared());
    for (const auto& y : others(x)) {
      auto other = taker->shared_mutex(y);
      EXPECT_TRUE(other.try_lock_for(free_within())) << "a reader of '" << x << "' kept a writer of '" << y << "' out";
      other.unlock();
    }
    held.unlock_shared();
  }
}

// Each name its own number of permits: one semaphore's permits out, or its
// count, are never another's.
TEST_P(SemaphoreNameIndependence, SemaphoresOfOtherNamesCountTheirOwnPermits) {
  auto holder = client(), taker = client();
  auto permits = [](const std::string& n) {
    return static_cast<std::ptrdiff_t>(std::find(names().begin(), names().end(), n) - names().begin()) + 1;
  };
  for (const auto& x : names()) {
    auto held = holder->semaphore(x, permits(x));
    for (std::ptrdiff_t i = 0; i < permits(x); ++i) ASSERT_TRUE(held.try_acquire()) << "'" << x << "' was not free";
    for (const auto& y : others(x)) {
      auto other = taker->semaphore(y, permits(y));
      EXPECT_EQ(other.in_use(), 0) << "'" << x << "''s permits counted as '" << y << "''s";
      EXPECT_TRUE(other.try_acquire()) << "'" << x << "''s permits out kept '" << y << "''s from being taken";
      if (other.held() > 0) {
        EXPECT_EQ(other.in_use(), 1);
        other.release();
      }
    }
    EXPECT_EQ(held.in_use(), permits(x));
    held.release(permits(x));
  }
}

// (Counters and latches apart: on some stores a latch is the counter of its
// name, by design.)
TEST_P(CounterNameIndependence, CountersOfOtherNamesHoldTheirOwnCounts) {
  auto c = client();
  std::vector<Counter> counters;
  for (std::size_t i = 0; i < names().size(); ++i) {
    counters.push_back(c->counter(names()[i]));
    counters.back().store(static_cast<std::int64_t>(10 * (i + 1)));
  }
  for (std::size_t i = 0; i < names().size(); ++i) {
    counters[i].fetch_add(1);
    for (std::size_t j = 0; j < names().size(); ++j)
      EXPECT_EQ(client()->counter(names()[j]).load(), static_cast<std::int64_t>(10 * (j + 1) + (j <= i ? 1 : 0)))
          << "counter '" << names()[j] << "' after adding to '" << names()[i] << "'";
  }
}

TEST_P(CounterNameIndependence, LatchesOfOtherNamesHoldTheirOwnCounts) {
  auto c = client();
  std::vector<Latch> latches;
  for (const auto& n : names()) latches.push_back(c->latch(n, 1));
  for (std::size_t i = 0; i < names().size(); ++i) {
    latches[i].count_down();
    for (std::size_t j = 0; j < names().size(); ++j)
      EXPECT_EQ(client()->latch(names()[j], 1).try_wait(), j <= i)
          << "latch '" << names()[j] << "' after counting down '" << names()[i] << "'";
  }
}

TEST_P(ElectionNameIndependence, ElectionsOfOtherNamesHaveTheirOwnLeaders) {
  auto leader = client(), candidate = client();
  for (const auto& x : names()) {
    auto led = leader->election(x);
    ASSERT_TRUE(led.campaign_for(scaled(10s), "leader of " + x)) << "'" << x << "' had a leader";
    for (const auto& y : others(x)) {
      auto other = candidate->election(y);
      EXPECT_EQ(other.leader(), std::nullopt) << "'" << x << "''s leader was seen as '" << y << "''s";
      EXPECT_TRUE(other.campaign_for(scaled(3s), "leader of " + y)) << "'" << x << "''s leader kept '" << y
                                                                     << "' from electing its own";
      if (other.is_leader()) {
        EXPECT_EQ(led.leader(), std::optional<std::string>("leader of " + x));
        other.resign();
      }
    }
    led.resign();
  }
}

// One member in each barrier of two parties: none opens. ('a/waiters' too:
// a layout that keeps a barrier's members under <name>/waiters/ must not
// count that name's members as a's.)
TEST_P(BarrierNameIndependence, BarriersOfOtherNamesCountTheirOwnMembers) {
  auto names_here = names();
  names_here.push_back("a/waiters");
  std::vector<std::shared_ptr<Client>> clients;
  std::vector<std::future<bool>> entered;
  for (const auto& n : names_here) {
    clients.push_back(client());
    entered.push_back(std::async(std::launch::async, [c = clients.back(), n] {
      auto member = c->barrier(n, 2);
      return member.arrive_and_wait_for(scaled(2s));
    }));
  }
  for (std::size_t i = 0; i < names_here.size(); ++i)
    EXPECT_FALSE(entered[i].get()) << "barrier '" << names_here[i] << "' opened with one member of its own";
}

INSTANTIATE_TEST_SUITE_P(Backends, NameIndependence, ::testing::ValuesIn(backends_under_test()),
                         [](const auto& param_info) { return param_info.param.name; });
INSTANTIATE_TEST_SUITE_P(Backends, SharedNameIndependence, ::testing::ValuesIn(backends_claiming(&BackendUnderTest::shared)),
                         [](const auto& param_info) { return param_info.param.name; });
INSTANTIATE_TEST_SUITE_P(Backends, SemaphoreNameIndependence, ::testing::ValuesIn(backends_claiming(&BackendUnderTest::semaphore)),
                         [](const auto& param_info) { return param_info.param.name; });
INSTANTIATE_TEST_SUITE_P(Backends, CounterNameIndependence, ::testing::ValuesIn(backends_claiming(&BackendUnderTest::counters)),
                         [](const auto& param_info) { return param_info.param.name; });
INSTANTIATE_TEST_SUITE_P(Backends, ElectionNameIndependence, ::testing::ValuesIn(backends_claiming(&BackendUnderTest::election)),
                         [](const auto& param_info) { return param_info.param.name; });
INSTANTIATE_TEST_SUITE_P(Backends, BarrierNameIndependence, ::testing::ValuesIn(backends_claiming(&BackendUnderTest::barrier)),
                         [](const auto& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace dlock::test
