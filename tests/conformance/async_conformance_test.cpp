// The async API (dlock/hold.h), on every backend: futures, callbacks and
// (with Asio) coroutines acquire and release under contention as the
// fencing-checking resource sees it, in one process and across processes;
// cancelling leaves no queue entry behind; destroying the client ends what
// is pending, and no completion runs after it; bad input is refused.
#include "conformance_fixture.h"
#include "fenced_resource.h"

#include <dlock/dlock.h>

#ifdef DLOCK_TEST_ASIO
#include <dlock/asio.h>

#include <asio.hpp>
#endif

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

class AsyncConformance : public ConformanceFixture {
 protected:
  static std::string lock_name() { return name_in("async"); }
};

// `threads` threads each run `sections` critical sections on `resource`,
// each under the Hold `take` gives (work: 200 us inside).
void contend(FencedResource& resource, int threads, int sections, const std::function<Hold()>& take) {
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < sections; ++i) {
        Hold hold = take();
        ASSERT_TRUE(hold);
        resource.enter(hold.token(), t + 1);
        auto value = resource.read_counter();
        std::this_thread::sleep_for(200us);
        resource.write_counter(value + 1);
        resource.leave(t + 1);
        hold.unlock();
      }
    });
  }
  for (auto& t : pool) t.join();
}

void expect_exclusive(const ResourceCounts& counts, std::int64_t sections) {
  EXPECT_EQ(counts.overlaps, 0u);
  EXPECT_EQ(counts.duplicate_tokens, 0u);
  EXPECT_EQ(counts.stale_rejected, 0u);
  EXPECT_EQ(counts.accepted, static_cast<std::uint64_t>(sections));
  EXPECT_EQ(counts.counter, sections) << "lost updates under the lock";
}

// The error a failed future holds.
template <class T>
std::optional<errc> error_of(std::future<T>& f) {
  try {
    (void)f.get();
  } catch (const Error& e) {
    return e.kind();
  }
  return std::nullopt;
}

TEST_P(AsyncConformance, FuturesExcludeEachOtherAndThreadsAcrossProcesses) {
  // Three processes take the lock through async_lock(), two through lock().
  FencedResource resource(resource_path(), true);
  constexpr int processes = 5, sections = 60;
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int i = 0; i < processes; ++i) {
    std::vector<std::string> args{DLOCK_TEST_WORKER, "hammer", url(), lock_name(), std::to_string(sections),
                                  resource_path(), "200"};
    if (i < 3) args.push_back("async");
    workers.push_back(std::make_unique<ChildProcess>(args));
  }
  for (auto& w : workers) EXPECT_EQ(w->wait(scaled(120s)), std::optional<int>(0)) << "worker " << w->pid();
  expect_exclusive(resource.counts(), processes * sections);
}

TEST_P(AsyncConformance, FuturesOfTwoClientsTakeTurns) {
  FencedResource resource(resource_path(), true);
  auto a = client(), b = client();
  auto on_a = a->mutex(lock_name()), on_b = b->mutex(lock_name());
  std::atomic<int> n{0};
  contend(resource, 4, 15, [&] { return (n++ % 2 ? on_a : on_b).async_lock().get(); });
  expect_exclusive(resource.counts(), 4 * 15);
}

TEST_P(AsyncConformance, CallbacksUnderContentionTakeTurns) {
  FencedResource resource(resource_path(), true);
  auto c = client();
  auto m = c->mutex(lock_name());
  // Each thread asks through a callback, which hands the Hold over.
  contend(resource, 4, 15, [&] {
    auto handed = std::make_shared<std::promise<Hold>>();
    auto got = handed->get_future();
    m.async_lock([handed](Status s, Hold hold) {
      EXPECT_TRUE(s.ok()) << s.message();
      handed->set_value(std::move(hold));
    });
    return got.get();
  });
  expect_exclusive(resource.counts(), 4 * 15);
}

#ifdef DLOCK_TEST_ASIO
TEST_P(AsyncConformance, CoroutinesUnderContentionTakeTurns) {
  FencedResource resource(resource_path(), true);
  auto c = client();
  auto m = c->mutex(lock_name());
  constexpr int coroutines = 6, sections = 10;
  asio::io_context io;
  std::atomic<int> finished{0};
  auto sell = [&](int id) -> asio::awaitable<void> {
    asio::steady_timer work(co_await asio::this_coro::executor);
    for (int i = 0; i < sections; ++i) {
      Hold hold = co_await m.async_lock(asio::use_awaitable);
      resource.enter(hold.token(), id);
      auto value = resource.read_counter();
      work.expires_after(200us);
      co_await work.async_wait(asio::use_awaitable);  // others run meanwhile
      resource.write_counter(value + 1);
      resource.leave(id);
    }
    ++finished;
  };
  for (int id = 1; id <= coroutines; ++id) asio::co_spawn(io, sell(id), asio::detached);
  std::thread second([&] { io.run(); });
  io.run();  // returns once every coroutine is done: a pending acquisition is work
  second.join();
  EXPECT_EQ(finished, coroutines);
  expect_exclusive(resource.counts(), coroutines * sections);
}

TEST_P(AsyncConformance, CoroutinesSeeErrorsAsDlockErrors) {
  auto c = client();
  auto holder = c->mutex(lock_name());
  holder.lock();
  auto m = c->mutex(lock_name());
  asio::io_context io;
  std::optional<errc> seen;
  bool empty = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        Hold missed = co_await m.async_try_lock_for(50ms, asio::use_awaitable);
        empty = !missed;
        std::stop_source stop;
        stop.request_stop();
        try {
          (void)co_await m.async_lock(asio::use_awaitable, stop.get_token());
        } catch (const Error& e) {
          seen = e.kind();
        }
      },
      asio::detached);
  io.run();
  holder.unlock();
  EXPECT_TRUE(empty);
  EXPECT_EQ(seen, errc::cancelled);
}
#endif

TEST_P(AsyncConformance, ManyNamesAtOnceFromOneThread) {
  auto c = client();
  const std::string prefix = lock_name() + "/";
  constexpr int names = 200;
  std::vector<Mutex> mutexes;
  std::vector<std::future<Hold>> pending;
  for (int i = 0; i < names; ++i) mutexes.push_back(c->mutex(prefix + std::to_string(i)));
  for (auto& m : mutexes) pending.push_back(m.async_lock());
  std::vector<Hold> holds;
  for (auto& f : pending) {
    ASSERT_EQ(f.wait_for(scaled(30s)), std::future_status::ready);
    holds.push_back(f.get());
    ASSERT_TRUE(holds.back());
  }
  EXPECT_EQ(c->list_locks(prefix).size(), static_cast<std::size_t>(names));
  for (auto& h : holds) EXPECT_TRUE(h.unlock_checked().ok());
  EXPECT_TRUE(c->list_locks(prefix).empty());
}

// A thread of the client and a Hold are different owners: each waits for the other.
TEST_P(AsyncConformance, AThreadsHoldAndAHoldExcludeEachOther) {
  auto c = client();
  auto m = c->mutex(lock_name());
  m.lock();
  const auto first = m.token();
  EXPECT_FALSE(m.async_try_lock_for(scaled(200ms)).get()) << "a Hold taken while this thread holds it";
  auto pending = m.async_lock();
  EXPECT_EQ(pending.wait_for(scaled(200ms)), std::future_status::timeout);
  m.unlock();
  ASSERT_EQ(pending.wait_for(scaled(10s)), std::future_status::ready);
  Hold hold = pending.get();
  ASSERT_TRUE(hold);
  EXPECT_GT(hold.token(), first);
  EXPECT_EQ(hold.name(), lock_name());
  EXPECT_FALSE(hold.lost());
  EXPECT_FALSE(hold.stop_token().stop_requested());
  EXPECT_FALSE(m.try_lock()) << "the thread took the lock a Hold holds";
  hold.unlock();
  EXPECT_FALSE(hold);
  EXPECT_TRUE(m.try_lock_for(scaled(5s)));
  m.unlock();
}

// A Hold released by its destructor, moved between threads on the way.
TEST_P(AsyncConformance, AHoldReleasesWhenItGoesOnAnyThread) {
  auto c = client();
  auto m = c->mutex(lock_name());
  Hold hold = m.async_lock().get();
  std::thread([h = std::move(hold)]() mutable { Hold gone = std::move(h); }).join();
  EXPECT_TRUE(m.try_lock_for(scaled(5s)));
  m.unlock();
}

// The holder releases; a waiter that queued after a cancelled acquisition
// must get the lock at once, not after a stale entry ahead of it expires
// (redis: waiter_ttl, 2 s; zk: never, its node stays) — in order
// (max_barging_wait 0), so that a stale head would hold it back.
void expect_next_waiter_served_at_once(const std::function<std::shared_ptr<Client>()>& make, Mutex& holder,
                                       const std::string& name) {
  const MutexOptions in_order{.max_barging_wait = 0ms};
  auto other = make();
  auto later = other->mutex(name, in_order);
  std::atomic<bool> got{false};
  steady::time_point got_at{};
  std::thread waiter([&] {
    if (later.try_lock_for(scaled(30s))) {
      got_at = steady::now();
      got = true;
      later.unlock();
    }
  });
  std::this_thread::sleep_for(scaled(300ms));  // it waits, queued
  const auto released_at = steady::now();
  holder.unlock();
  waiter.join();
  ASSERT_TRUE(got);
  EXPECT_LT(got_at - released_at, scaled(1s)) << "a stale queue entry held the next waiter back";
}

TEST_P(AsyncConformance, CancellingLeavesNoQueueEntryBehind) {
  const MutexOptions in_order{.max_barging_wait = 0ms};
  auto holding = client();
  auto holder = holding->mutex(lock_name(), in_order);
  holder.lock();
  std::promise<Status> called;  // declared before the client: it outlives any completion
  auto c = client();
  auto m = c->mutex(lock_name(), in_order);
  std::stop_source stop_future, stop_callback;
  auto pending = m.async_lock(stop_future.get_token());
  m.async_lock([&](Status s, Hold hold) {
    EXPECT_FALSE(hold);
    called.set_value(s);
  }, stop_callback.get_token());
  std::this_thread::sleep_for(scaled(300ms));  // both queued behind the holder
  ASSERT_EQ(pending.wait_for(0s), std::future_status::timeout);
  stop_future.request_stop();
  stop_callback.request_stop();
  ASSERT_EQ(pending.wait_for(scaled(5s)), std::future_status::ready);
  EXPECT_EQ(error_of(pending), errc::cancelled);
  auto status = called.get_future();
  ASSERT_EQ(status.wait_for(scaled(5s)), std::future_status::ready);
  EXPECT_EQ(status.get().code(), errc::cancelled);
  expect_next_waiter_served_at_once([this] { return client(); }, holder, lock_name());
  EXPECT_TRUE(eventually([&] { return c->list_locks(lock_name()).empty(); }, 5s));
}

TEST_P(AsyncConformance, DestroyingTheClientEndsWhatIsPending) {
  const MutexOptions in_order{.max_barging_wait = 0ms};
  auto holding = client();
  auto holder = holding->mutex(lock_name(), in_order);
  holder.lock();
  // The holding client's threads may still be starting (a loaded,
  // instrumented run schedules them late; one starts another): count them
  // once their number holds still.
  int threads_before = thread_count();
  EXPECT_TRUE(eventually(
      [&] {
        std::this_thread::sleep_for(scaled(100ms));
        const int now = thread_count();
        const bool still = now == threads_before;
        threads_before = now;
        return still;
      },
      5s));
  const auto names_before = thread_names();
  auto c = client();
  std::atomic<bool> gone{false};
  std::atomic<int> called{0}, after{0}, unavailable{0};
  std::future<Hold> pending;
  {
    auto m = c->mutex(lock_name(), in_order);
    for (int i = 0; i < 3; ++i)
      m.async_lock([&](Status s, Hold hold) {
        if (gone) ++after;
        if (s.code() == errc::unavailable && !hold) ++unavailable;
        ++called;
      });
    pending = m.async_try_lock_for(1h);
  }
  std::this_thread::sleep_for(scaled(300ms));  // all queued behind the holder
  EXPECT_EQ(called, 0);
  c.reset();  // the last handle: the client goes now, and ends them first
  gone = true;
  EXPECT_EQ(called, 3);
  EXPECT_EQ(unavailable, 3);
  ASSERT_EQ(pending.wait_for(0s), std::future_status::ready);
  EXPECT_EQ(error_of(pending), errc::unavailable);
  EXPECT_TRUE(eventually([&] { return thread_count() <= threads_before; }, 5s))
      << "a thread outlived its client: " << thread_names() << " (before it: " << names_before << ")";
  expect_next_waiter_served_at_once([this] { return client(); }, holder, lock_name());
  std::this_thread::sleep_for(scaled(100ms));
  EXPECT_EQ(after, 0) << "a completion ran after the client was destroyed";
}

// A completion may let go of the client's last handle (its Hold): the
// client then goes on its own async thread, which must not wait for itself.
TEST_P(AsyncConformance, ACompletionMayDropTheLastHandle) {
  auto c = client();
  std::promise<void> got, dropped, done;
  {
    auto m = c->mutex(lock_name());
    m.async_lock([&](Status s, Hold hold) {
      EXPECT_TRUE(s.ok()) << s.message();
      got.set_value();
      dropped.get_future().wait();  // (a test's brief block: the client's other handles go)
      hold.unlock();                // the last handle on the client
      done.set_value();
    });
  }
  got.get_future().wait();
  c.reset();
  dropped.set_value();
  auto finished = done.get_future();
  ASSERT_EQ(finished.wait_for(scaled(10s)), std::future_status::ready);
  auto again = client();
  auto m = again->mutex(lock_name());
  EXPECT_TRUE(m.try_lock_for(scaled(5s)));
  m.unlock();
}

TEST_P(AsyncConformance, BadInputIsRefusedClearly) {
  auto c = client();
  auto m = c->mutex(lock_name());
  try {
    m.async_lock(AsyncCallback{});
    ADD_FAILURE() << "an empty callback was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("callback"), std::string::npos) << e.what();
  }
  Hold empty;
  EXPECT_FALSE(empty);
  EXPECT_FALSE(empty.lost());
  EXPECT_TRUE(empty.name().empty());
  EXPECT_THROW((void)empty.token(), Error);
  EXPECT_THROW((void)empty.stop_token(), Error);
  EXPECT_EQ(empty.unlock_checked().code(), errc::not_owner);
  empty.unlock();  // nothing, and no throw

  // A negative timeout counts as zero: one attempt.
  Hold held = m.async_try_lock_for(-5s).get();
  EXPECT_TRUE(held) << "one attempt on a free lock";
  const auto asked = steady::now();
  EXPECT_FALSE(m.async_try_lock_for(-5s).get());
  EXPECT_LT(steady::now() - asked, scaled(2s));
  held.unlock();

  // Asked again after unlock_checked(): it holds nothing.
  Hold again = m.async_lock().get();
  EXPECT_TRUE(again.unlock_checked().ok());
  EXPECT_EQ(again.unlock_checked().code(), errc::not_owner);
}

// The same suite's fixture, on the backends that also have the primitive.
class AsyncSemaphoreConformance : public AsyncConformance {};
class AsyncElectionConformance : public AsyncConformance {};

TEST_P(AsyncSemaphoreConformance, SemaphorePermitsBelongToTheirHolds) {
  auto c = client();
  auto semaphore = c->semaphore(lock_name(), 2);
  if (!GetParam().async_semaphore) {
    try {
      (void)semaphore.async_acquire();
      ADD_FAILURE() << "async_acquire accepted where permits are not leased";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), errc::unsupported);
    }
    return;
  }
  FencedResource resource(resource_path(), true);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        Hold permit = semaphore.async_acquire().get();
        ASSERT_TRUE(permit);
        resource.occupy();
        std::this_thread::sleep_for(2ms);
        resource.vacate();
      }
    });
  for (auto& t : threads) t.join();
  const auto counts = resource.counts();
  EXPECT_EQ(counts.occupied, 40u);
  EXPECT_LE(counts.max_occupancy, 2);
  EXPECT_EQ(semaphore.held(), 0) << "a Hold's permit counted as the handle's";
  // Both permits out through Holds: a third waits until one goes.
  Hold one = semaphore.async_acquire().get(), two = semaphore.async_acquire().get();
  EXPECT_FALSE(semaphore.async_try_acquire_for(scaled(100ms)).get());
  auto third = semaphore.async_acquire();
  one.unlock();
  ASSERT_EQ(third.wait_for(scaled(10s)), std::future_status::ready);
  EXPECT_TRUE(third.get());
}

TEST_P(AsyncElectionConformance, CampaignsLeadInTurn) {
  auto c = client();
  auto election = c->election(lock_name());
  Hold first = election.async_campaign("first").get();
  ASSERT_TRUE(first);
  EXPECT_EQ(election.leader(), "first");
  EXPECT_FALSE(election.is_leader()) << "a Hold's leadership counted as the thread's";
  auto second = election.async_campaign("second");
  EXPECT_EQ(second.wait_for(scaled(200ms)), std::future_status::timeout);
  const auto token = first.token();
  first.unlock();  // resigns
  ASSERT_EQ(second.wait_for(scaled(10s)), std::future_status::ready);
  Hold next = second.get();
  ASSERT_TRUE(next);
  EXPECT_GT(next.token(), token);
  EXPECT_TRUE(eventually([&] { return election.leader() == "second"; }, 5s));
}

INSTANTIATE_TEST_SUITE_P(Backends, AsyncConformance, ::testing::ValuesIn(backends_claiming(&BackendUnderTest::async)),
                         [](const auto& param_info) { return param_info.param.name; });
INSTANTIATE_TEST_SUITE_P(Backends, AsyncSemaphoreConformance,
                         ::testing::ValuesIn(backends_claiming(&BackendUnderTest::async, &BackendUnderTest::semaphore)),
                         [](const auto& param_info) { return param_info.param.name; });
INSTANTIATE_TEST_SUITE_P(Backends, AsyncElectionConformance,
                         ::testing::ValuesIn(backends_claiming(&BackendUnderTest::async, &BackendUnderTest::election)),
                         [](const auto& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace dlock::test
