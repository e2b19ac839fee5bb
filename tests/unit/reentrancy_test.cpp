// Reentrancy bookkeeping, ownership and tokens, on the embedded file backend
// (a private temp dir: only the local filesystem, no server).
#include <dlock/dlock.h>

#include "unit_support.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::on_other_thread;
using test::scaled;
using test::TempDir;
using test::thrown_code;

static_assert(!std::is_copy_constructible_v<Mutex>);
static_assert(std::is_nothrow_move_constructible_v<Mutex>);
static_assert(noexcept(std::declval<Mutex&>().unlock()));
static_assert(noexcept(std::declval<Mutex&>().unlock_checked()));

class Reentrancy : public ::testing::Test {
 protected:
  TempDir dir_;
  std::shared_ptr<Client> client_ = connect(dir_.url());
  // A second client in the same process: another owner of the same store.
  std::shared_ptr<Client> other_ = connect(dir_.url());

  // Whether the other client can take `name` right now (and gives it back).
  bool other_can_take(const std::string& name) {
    return on_other_thread([&] {
      auto m = other_->mutex(name);
      if (!m.try_lock()) return false;
      m.unlock();
      return true;
    });
  }
};

TEST_F(Reentrancy, LockTwiceNeedsTwoUnlocks) {
  auto m = client_->mutex("stock:1");
  EXPECT_EQ(m.hold_count(), 0u);
  EXPECT_FALSE(m.held_by_current_thread());
  m.lock();
  const auto token = m.token();
  m.lock();
  EXPECT_EQ(m.hold_count(), 2u);
  EXPECT_EQ(m.token(), token) << "re-entry must not take a new grant";
  EXPECT_FALSE(other_can_take("stock:1"));

  m.unlock();
  EXPECT_EQ(m.hold_count(), 1u);
  EXPECT_TRUE(m.held_by_current_thread());
  EXPECT_FALSE(other_can_take("stock:1")) << "the first unlock of two released the lock";

  m.unlock();
  EXPECT_EQ(m.hold_count(), 0u);
  EXPECT_FALSE(m.held_by_current_thread());
  EXPECT_TRUE(other_can_take("stock:1"));
  EXPECT_EQ(client_->stats().failed_releases, 0u);
  const auto stats = client_->stats();
  EXPECT_EQ(stats.acquisitions, 1u) << "re-entry counted as an acquisition";
  EXPECT_EQ(stats.releases, 1u) << "only the last unlock releases";
  EXPECT_EQ(stats.failed_releases, 0u);
}

TEST_F(Reentrancy, TryLockAndTimedFormsCountToo) {
  auto m = client_->mutex("n");
  ASSERT_TRUE(m.try_lock());
  ASSERT_TRUE(m.try_lock());
  ASSERT_TRUE(m.try_lock_for(10ms));
  ASSERT_TRUE(m.try_lock_until(std::chrono::steady_clock::now() + 10ms));
  ASSERT_TRUE(m.try_lock_until(std::chrono::system_clock::now() + 10ms));
  EXPECT_EQ(m.hold_count(), 5u);
  for (int i = 0; i < 5; ++i) m.unlock();
  EXPECT_EQ(m.hold_count(), 0u);
  EXPECT_TRUE(other_can_take("n"));
}

TEST_F(Reentrancy, MutexObjectsWithTheSameNameShareTheHoldCount) {
  auto a = client_->mutex("shared");
  auto b = client_->mutex("shared");
  a.lock();
  b.lock();
  EXPECT_EQ(a.hold_count(), 2u);
  EXPECT_EQ(b.hold_count(), 2u);
  EXPECT_EQ(a.token(), b.token());
  a.unlock();
  EXPECT_EQ(b.hold_count(), 1u);
  EXPECT_FALSE(other_can_take("shared"));
  b.unlock();
  EXPECT_EQ(a.hold_count(), 0u);
  EXPECT_TRUE(other_can_take("shared"));
}

TEST_F(Reentrancy, HoldsArePerThread) {
  auto m = client_->mutex("per-thread");
  m.lock();
  // Another thread of the same client neither shares the hold nor gets it.
  EXPECT_TRUE(on_other_thread([&] { return m.hold_count() == 0 && !m.held_by_current_thread(); }));
  EXPECT_FALSE(on_other_thread([&] { return m.try_lock(); }));
  EXPECT_FALSE(on_other_thread([&] { return m.try_lock_for(scaled(20ms)); }));
  m.unlock();
  EXPECT_TRUE(on_other_thread([&] {
    bool got = m.try_lock();
    if (got) m.unlock();
    return got;
  }));
}

TEST_F(Reentrancy, NonReentrantMutexLockedTwiceThrowsWouldDeadlock) {
  auto m = client_->mutex("plain", {.reentrant = false});
  m.lock();
  const auto token = m.token();
  std::string message;
  EXPECT_EQ(thrown_code([&] { m.lock(); }, &message), errc::would_deadlock);
  EXPECT_THAT(message, ::testing::HasSubstr("plain"));
  EXPECT_EQ(thrown_code([&] { (void)m.try_lock(); }), errc::would_deadlock);
  EXPECT_EQ(thrown_code([&] { (void)m.try_lock_for(1s); }), errc::would_deadlock);
  // Nothing changed: still held once, same grant.
  EXPECT_EQ(m.hold_count(), 1u);
  EXPECT_EQ(m.token(), token);
  EXPECT_FALSE(other_can_take("plain"));
  m.unlock();
  EXPECT_EQ(m.hold_count(), 0u);
  EXPECT_TRUE(other_can_take("plain"));
}

TEST_F(Reentrancy, UnlockCheckedByAThreadWithoutAHoldIsNotOwnerAndChangesNothing) {
  auto m = client_->mutex("owned");
  m.lock();
  Status s = on_other_thread([&] { return m.unlock_checked(); });
  EXPECT_EQ(s.code(), errc::not_owner);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("owned"));
  EXPECT_EQ(m.hold_count(), 1u);
  EXPECT_FALSE(other_can_take("owned")) << "a non-owner's unlock released the lock";
  EXPECT_TRUE(m.unlock_checked().ok());
  EXPECT_TRUE(other_can_take("owned"));
}

TEST_F(Reentrancy, UnlockByANonOwnerDoesNotThrowAndIsCounted) {
  auto m = client_->mutex("misuse");
  EXPECT_EQ(client_->stats().failed_releases, 0u);
  m.unlock();  // never held at all
  EXPECT_EQ(client_->stats().failed_releases, 1u);
  m.lock();
  on_other_thread([&] {
    m.unlock();
    return 0;
  });
  EXPECT_EQ(client_->stats().failed_releases, 2u);
  EXPECT_EQ(m.hold_count(), 1u);
  EXPECT_FALSE(other_can_take("misuse"));
  m.unlock();
  m.unlock();  // one too many
  EXPECT_EQ(client_->stats().failed_releases, 3u);
  EXPECT_EQ(other_->stats().failed_releases, 0u) << "counters are per client";
  EXPECT_EQ(m.unlock_checked().code(), errc::not_owner);
}

TEST_F(Reentrancy, TokenAndStopTokenWithoutAHoldThrowNotOwner) {
  auto m = client_->mutex("t");
  EXPECT_EQ(thrown_code([&] { (void)m.token(); }), errc::not_owner);
  EXPECT_EQ(thrown_code([&] { (void)m.stop_token(); }), errc::not_owner);
  EXPECT_FALSE(m.lost());
  m.lock();
  EXPECT_EQ(on_other_thread([&] { return thrown_code([&] { (void)m.token(); }); }), errc::not_owner);
  EXPECT_FALSE(m.stop_token().stop_requested());
  EXPECT_FALSE(m.lost());
  m.unlock();
  EXPECT_EQ(thrown_code([&] { (void)m.token(); }), errc::not_owner);
}

TEST_F(Reentrancy, TokensStrictlyIncreaseAcrossAcquisitionsAndClients) {
  auto mine = client_->mutex("fenced");
  auto theirs = other_->mutex("fenced");
  std::uint64_t last = 0;
  for (int i = 0; i < 6; ++i) {
    Mutex& m = i % 2 ? theirs : mine;
    std::uint64_t token = on_other_thread([&] {
      m.lock();
      auto t = m.token();
      m.unlock();
      return t;
    });
    EXPECT_GT(token, last) << "acquisition " << i;
    last = token;
  }
  // A fresh client of the same store continues the sequence.
  auto third = connect(dir_.url());
  auto m = third->mutex("fenced");
  m.lock();
  EXPECT_GT(m.token(), last);
  m.unlock();
}

TEST_F(Reentrancy, TryLockForANegativeTimeoutReturnsPromptly) {
  auto m = client_->mutex("busy");
  m.lock();
  auto contender = other_->mutex("busy");
  const auto start = std::chrono::steady_clock::now();
  bool got = on_other_thread([&] {
    return contender.try_lock_for(-5s) || contender.try_lock_for(-1ms) ||
           contender.try_lock_until(std::chrono::steady_clock::now() - 1h) ||
           contender.try_lock_until(std::chrono::system_clock::now() - 1h);
  });
  EXPECT_FALSE(got);
  EXPECT_LT(std::chrono::steady_clock::now() - start, scaled(1000ms));
  m.unlock();
  // A negative timeout still makes one attempt.
  EXPECT_TRUE(on_other_thread([&] {
    bool ok = contender.try_lock_for(-5s);
    if (ok) contender.unlock();
    return ok;
  }));
}

TEST_F(Reentrancy, TimedLockWaitsAboutItsTimeout) {
  auto m = client_->mutex("timed");
  m.lock();
  auto contender = other_->mutex("timed");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(on_other_thread([&] { return contender.try_lock_for(100ms); }));
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, 100ms);
  EXPECT_LT(waited, 100ms + scaled(1500ms));
  m.unlock();
}

TEST_F(Reentrancy, AWaiterGetsTheLockWhenItIsReleased) {
  auto m = client_->mutex("handoff");
  m.lock();
  const auto first = m.token();
  std::atomic<bool> acquired{false};
  std::uint64_t second = 0;
  std::thread waiter([&] {
    auto w = other_->mutex("handoff");
    w.lock();
    second = w.token();
    acquired = true;
    w.unlock();
  });
  std::this_thread::sleep_for(scaled(50ms));
  EXPECT_FALSE(acquired.load());
  m.unlock();
  waiter.join();
  EXPECT_TRUE(acquired.load());
  EXPECT_GT(second, first);
}

TEST_F(Reentrancy, StandardLockAdaptorsWork) {
  auto a = client_->mutex("std-a");
  auto b = client_->mutex("std-b");
  {
    std::lock_guard g(a);
    EXPECT_EQ(a.hold_count(), 1u);
  }
  EXPECT_EQ(a.hold_count(), 0u);
  {
    std::unique_lock u(a);
    EXPECT_TRUE(u.owns_lock());
    u.unlock();
    EXPECT_EQ(a.hold_count(), 0u);
    EXPECT_TRUE(u.try_lock_for(10ms));
    EXPECT_EQ(a.hold_count(), 1u);
  }
  EXPECT_EQ(a.hold_count(), 0u);
  {
    std::unique_lock u(a, std::try_to_lock);
    EXPECT_TRUE(u.owns_lock());
  }
  {
    std::scoped_lock both(a, b);
    EXPECT_EQ(a.hold_count(), 1u);
    EXPECT_EQ(b.hold_count(), 1u);
    EXPECT_FALSE(other_can_take("std-a"));
    EXPECT_FALSE(other_can_take("std-b"));
  }
  EXPECT_EQ(a.hold_count(), 0u);
  EXPECT_EQ(b.hold_count(), 0u);
  EXPECT_TRUE(other_can_take("std-a"));
  EXPECT_TRUE(other_can_take("std-b"));
  {
    // std::lock takes both through try_lock/lock.
    std::unique_lock ua(a, std::defer_lock);
    std::unique_lock ub(b, std::defer_lock);
    std::lock(ua, ub);
    EXPECT_TRUE(ua.owns_lock() && ub.owns_lock());
  }
  EXPECT_EQ(client_->stats().failed_releases, 0u);
}

TEST_F(Reentrancy, ReleasedWhenTheClientGoesAway) {
  {
    auto c = connect(dir_.url());
    auto m = c->mutex("left-held");
    m.lock();
    EXPECT_FALSE(other_can_take("left-held"));
  }
  EXPECT_TRUE(other_can_take("left-held"));
}

TEST_F(Reentrancy, ForceUnlockMakesTheHolderLoseItsHold) {
  auto m = client_->mutex("stuck", {.lease = scaled(3000ms), .renew_interval = scaled(50ms)});
  m.lock();
  const auto token = m.token();
  auto stop = m.stop_token();
  EXPECT_FALSE(m.lost());
  other_->mutex("stuck").force_unlock();
  // lost() turns true just before the stop is requested: wait for both.
  EXPECT_TRUE(test::eventually([&] { return m.lost() && stop.stop_requested(); }, 2000ms))
      << "the next renewal should report the loss";
  EXPECT_EQ(m.hold_count(), 1u) << "a lost hold stays counted until unlock()";
  // Re-entry on a lost hold is refused.
  EXPECT_EQ(thrown_code([&] { m.lock(); }), errc::lock_lost);
  // Someone else can take it meanwhile, with a higher token.
  std::uint64_t theirs = on_other_thread([&] {
    auto o = other_->mutex("stuck");
    if (!o.try_lock()) return std::uint64_t{0};
    auto t = o.token();
    o.unlock();
    return t;
  });
  EXPECT_GT(theirs, token);
  Status s = m.unlock_checked();
  EXPECT_EQ(s.code(), errc::lock_lost);
  EXPECT_EQ(m.hold_count(), 0u);
  EXPECT_EQ(client_->stats().failed_releases, 1u);
  EXPECT_EQ(client_->stats().leases_lost, 1u);
  EXPECT_TRUE(other_can_take("stuck"));
}

TEST_F(Reentrancy, FixedLeaseIsLostWhenItRunsOut) {
  auto m = client_->mutex("fixed", {.lease = scaled(150ms), .lease_mode = LeaseMode::fixed});
  // The lease runs from when the request was sent: before lock(), not after
  // it returns (on a loaded machine the acquire itself takes milliseconds).
  const auto start = std::chrono::steady_clock::now();
  m.lock();
  auto stop = m.stop_token();
  EXPECT_FALSE(m.lost());
  ASSERT_TRUE(test::eventually([&] { return m.lost() && stop.stop_requested(); }, 2000ms));
  EXPECT_GE(std::chrono::steady_clock::now() - start, scaled(150ms) - 5ms);
  // Its lease is over, so another owner may take it.
  EXPECT_TRUE(other_can_take("fixed"));
  EXPECT_EQ(m.unlock_checked().code(), errc::lock_lost);
  EXPECT_EQ(m.hold_count(), 0u);
}

TEST_F(Reentrancy, WatchdogKeepsAShortLeaseAlive) {
  auto m = client_->mutex("kept", {.lease = scaled(200ms), .renew_interval = scaled(40ms)});
  m.lock();
  std::this_thread::sleep_for(scaled(600ms));
  EXPECT_FALSE(m.lost()) << "the watchdog let a held lease run out";
  EXPECT_FALSE(other_can_take("kept"));
  EXPECT_GE(client_->stats().renewals, 3u);
  EXPECT_TRUE(m.unlock_checked().ok());
}

// Whether `wait` (a timed lock call on another client) is still waiting when
// the holder releases, and then gets the lock.
template <class Wait>
bool waits_for_release(Client& holder_client, Client& waiter_client, Wait wait) {
  auto held = holder_client.mutex("huge");
  held.lock();
  auto contender = waiter_client.mutex("huge");
  std::atomic<int> got{-1};
  std::thread waiter([&] {
    bool ok = wait(contender);
    if (ok) contender.unlock();
    got = ok;
  });
  std::this_thread::sleep_for(scaled(100ms));
  held.unlock();
  waiter.join();
  return got.load() == 1;
}

TEST_F(Reentrancy, HugeTimeoutsWaitInsteadOfGivingUp) {
  EXPECT_TRUE(waits_for_release(*client_, *other_,
                                [](Mutex& m) { return m.try_lock_for(std::chrono::hours(24 * 365 * 100)); }));
  EXPECT_TRUE(waits_for_release(
      *client_, *other_, [](Mutex& m) { return m.try_lock_until(std::chrono::system_clock::time_point::max()); }));
  EXPECT_TRUE(waits_for_release(
      *client_, *other_, [](Mutex& m) { return m.try_lock_until(std::chrono::steady_clock::time_point::max()); }));
}

// "Wait forever" spelled as milliseconds::max() must not overflow into a
// deadline in the past (the call would give up at once).
TEST_F(Reentrancy, MaxTimeoutsWaitInsteadOfOverflowing) {
  EXPECT_TRUE(waits_for_release(*client_, *other_,
                                [](Mutex& m) { return m.try_lock_for(std::chrono::milliseconds::max()); }));
  EXPECT_TRUE(waits_for_release(*client_, *other_,
                                [](Mutex& m) { return m.try_lock_for(std::chrono::seconds::max()); }));
}

TEST_F(Reentrancy, ThreadsOfOneClientExcludeEachOther) {
  auto m = client_->mutex("counter");
  int inside = 0;  // touched only under the lock: TSan checks the exclusion too
  int total = 0;
  std::atomic<int> overlaps{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        std::lock_guard g(m);
        if (++inside != 1) ++overlaps;
        ++total;
        {
          std::lock_guard again(m);  // re-entry from the holding thread
          ++total;
        }
        --inside;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(total, 4 * 25 * 2);
  EXPECT_EQ(client_->stats().failed_releases, 0u);
  EXPECT_EQ(client_->stats().acquisitions, 100u);
}

// Stop callbacks run with none of dlock's locks held, so a callback may call
// back into the client (stats(), token(), lost(), unlock(), ...). This test
// exits the process if it hangs.
TEST_F(Reentrancy, StopCallbackMayCallBackIntoTheClient) {
  auto m = client_->mutex("callback", {.lease = scaled(3000ms), .renew_interval = scaled(50ms)});
  m.lock();
  std::atomic<bool> returned{false};
  std::stop_callback on_loss(m.stop_token(), [&] {
    (void)client_->stats();  // e.g. logging the client's counters
    returned = true;
  });
  other_->mutex("callback").force_unlock();
  if (!test::eventually([&] { return returned.load(); }, 3000ms)) {
    std::fprintf(stderr, "DEADLOCK: the stop_callback never returned (the keeper thread is stuck)\n");
    std::fflush(stderr);
    std::_Exit(1);
  }
  EXPECT_TRUE(m.lost());
  EXPECT_EQ(m.unlock_checked().code(), errc::lock_lost);
}

}  // namespace
}  // namespace dlock
