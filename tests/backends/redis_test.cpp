// The redis:// backend's own behaviour, no fault injected: credentials and
// host names, keys of another type and bad counts refused (nothing
// changed), 10,000 held locks and permits renewed in one batch per period,
// no connection or thread outliving its client, a semaphore shared by
// processes, wake-ups and handovers at the head of the line, and
// wait_replicas on a server without replicas. Each test starts its own
// redis-server in a temp dir (it reads the server's keys and connections,
// or sets a password).
#include "child_process.h"
#include "fenced_resource.h"
#include "redis_server.h"
#include "thrown.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// (The suite keeps the name it had in tests/fault/redis_fault_test.cpp, which
// runs the same fixture: CTest's test names and the presets' filters use it.)
using RedisFault = OwnRedisServer;

TEST_F(RedisFault, WrongPasswordIsAClearErrorWithoutTheSecret) {
  stop();
  start({"--requirepass", "s3cr3t-pw"});
  const std::string host = base_url().substr(std::string("redis://").size());
  try {
    (void)dlock::connect("redis://:not-the-pw@" + host, {.op_timeout = 1s})->mutex("x").try_lock();
    FAIL() << "a wrong password was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), errc::invalid_argument) << e.what();
    EXPECT_EQ(std::string(e.what()).find("not-the-pw"), std::string::npos) << e.what();
  }
  auto client = dlock::connect("redis://:s3cr3t-pw@" + host);
  EXPECT_EQ(client->url().find("s3cr3t-pw"), std::string::npos) << client->url();
  auto m = client->mutex("x");
  EXPECT_TRUE(m.try_lock());
  m.unlock();
}

// Host names are looked up by the backend within op_timeout (hiredis's own
// lookup has no timeout). The server listens on 127.0.0.1 only, so
// "localhost" works only if its IPv4 address is the one chosen.
TEST_F(RedisFault, HostNamesAreLookedUpWithinTheCallTimeout) {
  auto client = dlock::connect("redis://localhost:" + port(), {.op_timeout = 2s});
  auto m = client->mutex("by-name");
  EXPECT_TRUE(m.try_lock());
  m.unlock();
  const auto start = steady::now();
  try {
    (void)dlock::connect("redis://no-such-host.invalid:" + port(), {.op_timeout = 500ms});
    ADD_FAILURE() << "connected to a host name that does not exist";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), errc::unavailable) << e.what();
    EXPECT_NE(std::string(e.what()).find("host name"), std::string::npos) << e.what();
  }
  EXPECT_LT(steady::now() - start, scaled(1500ms)) << "the lookup overran op_timeout (500ms)";
}

TEST_F(RedisFault, KeyOfAnotherTypeIsRefusedAndLeftAlone) {
  auto client = dlock::connect(base_url() + "/0?prefix=wt:");
  auto m = client->mutex("typed");
  ASSERT_TRUE(m.try_lock());
  auto keys = cli("--scan --pattern 'wt:*'");
  m.unlock();
  ASSERT_FALSE(keys.empty());
  const std::string key = keys.substr(0, keys.find('\n'));
  cli("DEL '" + key + "'");
  cli("SET '" + key + "' not-a-lock");
  try {
    (void)m.try_lock();
    FAIL() << "locked a key that holds a string";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), errc::invalid_argument) << e.what();
  }
  EXPECT_EQ(cli("GET '" + key + "'"), "not-a-lock\n") << "the foreign key was changed";
}

// `held` leases of 3 s (renewed every 1 s) are all renewed each period, in
// about one batch (one round trip) per period.
void expect_one_batch_per_period(Client& client, int held, const char* what) {
  // Taking them spreads their schedules over a few seconds; one period
  // (plus the half period a lease may join a batch early) merges them.
  // Measure after that.
  std::this_thread::sleep_for(1500ms);
  const auto before = client.stats();
  std::this_thread::sleep_for(3500ms);
  const auto after = client.stats();
  const auto batches = after.renewal_batches - before.renewal_batches;
  const auto renewals = after.renewals - before.renewals;
  std::printf("%d %s over 3.5 s: %llu renewal batches, %llu leases renewed\n", held, what,
              static_cast<unsigned long long>(batches), static_cast<unsigned long long>(renewals));
  // Every ~1 s: at least twice each in 3.5 s even on a loaded machine (a
  // 10,000-lease batch itself takes a while to send and answer).
  EXPECT_GE(renewals, 2u * static_cast<unsigned>(held)) << what << " were not renewed every period";
  EXPECT_LE(batches, 6u) << "renewals took more than about one round trip per period";
}

TEST_F(RedisFault, TenThousandHeldLocksRenewInOneBatchPerPeriod) {
  constexpr int locks = 10'000;
  auto client = dlock::connect(base_url());
  std::vector<Mutex> held;
  held.reserve(locks);
  for (int i = 0; i < locks; ++i) {
    held.push_back(client->mutex("many:" + std::to_string(i), {.lease = 3s}));  // renewed every 1 s
    held.back().lock();
  }
  expect_one_batch_per_period(*client, locks, "held locks");
  for (auto& m : held) EXPECT_FALSE(m.lost());
  for (auto& m : held) m.unlock();
}

TEST_F(RedisFault, NoConnectionOrThreadOutlivesTheClient) {
  // A thread first: a sanitizer's runtime starts its own helper thread
  // lazily (TSan), which must not be counted against the client.
  std::thread([] {}).join();
  const int threads_before = thread_count();
  const int before = connections();
  {
    auto client = dlock::connect(base_url());
    auto m = client->mutex("leak", {.lease = 600ms});
    std::vector<std::thread> waiters;
    m.lock();
    for (int i = 0; i < 4; ++i)
      waiters.emplace_back([&] {
        if (m.try_lock_for(2s)) m.unlock();
      });
    std::this_thread::sleep_for(300ms);
    EXPECT_GT(connections(), before);
    m.unlock();
    for (auto& t : waiters) t.join();
  }
  const auto until = steady::now() + 3s;
  while (thread_count() != threads_before && steady::now() < until) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(thread_count(), threads_before);
  while (connections() != before && steady::now() < until) std::this_thread::sleep_for(50ms);
  EXPECT_EQ(connections(), before) << "connections left open after the client was destroyed";
}

// Eight processes share a 3-permit semaphore: never more than 3 inside at
// once (the resource records the most it saw), and 3 do get in together.
TEST_F(RedisFault, EightProcessesNeverHoldMoreThanTheirPermits) {
  const std::string resource_path = dir_.path() + "/resource";
  FencedResource resource(resource_path, true);
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int i = 0; i < 8; ++i)
    workers.push_back(std::make_unique<ChildProcess>(std::vector<std::string>{
        DLOCK_TEST_WORKER, "hammer", base_url(), "crawl", "25", resource_path, "3000", "permits=3"}));
  for (auto& w : workers) EXPECT_EQ(w->wait(scaled(60s)), std::optional<int>(0));
  const auto counts = resource.counts();
  EXPECT_EQ(counts.occupied, 8u * 25u) << "not every section ran";
  EXPECT_LE(counts.max_occupancy, 3) << "more permits out than the semaphore has";
  EXPECT_EQ(counts.max_occupancy, 3) << "the permits were never all in use at once";
}

TEST_F(RedisFault, TenThousandHeldPermitsRenewInOneBatchPerPeriod) {
  constexpr int permits = 10'000;
  auto client = dlock::connect(base_url());
  auto semaphore = client->semaphore("many", permits, {.lease = 3s});  // renewed every 1 s
  for (int i = 0; i < permits; ++i) semaphore.acquire();
  expect_one_batch_per_period(*client, permits, "held permits");
  EXPECT_FALSE(semaphore.lost());
  EXPECT_EQ(semaphore.in_use(), permits);
  semaphore.release(permits);
  EXPECT_EQ(semaphore.in_use(), 0);
}

// Misuse and foreign data: clear errors, and nothing changes.
TEST_F(RedisFault, BadCountsAndForeignKeysAreRefusedAndChangeNothing) {
  auto client = dlock::connect(base_url() + "/0?prefix=bad:");
  auto three = client->semaphore("pool", 3);
  three.acquire();
  auto two = client->semaphore("pool", 2);
  try {
    (void)two.try_acquire();
    ADD_FAILURE() << "a semaphore declared with another count was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), errc::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find('2'), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find('3'), std::string::npos) << e.what();
  }
  EXPECT_EQ(three.in_use(), 1);
  three.release();
  EXPECT_EQ(thrown([&] { (void)client->semaphore("pool", 0); }), errc::invalid_argument);
  EXPECT_EQ(thrown([&] { (void)client->latch("gate", -1); }), errc::invalid_argument);
  EXPECT_EQ(thrown([&] { (void)client->barrier("meet", 0); }), errc::invalid_argument);
  // A key of another type where a counter, a latch or a semaphore would be.
  for (const std::string key : {"bad:{n}:counter", "bad:{gate}:latch", "bad:{s}:sem"}) {
    cli("SET '" + key + "' foreign");
  }
  EXPECT_EQ(thrown([&] { (void)client->counter("n").fetch_add(1); }), errc::invalid_argument);
  EXPECT_EQ(thrown([&] { (void)client->latch("gate", 1); }), errc::invalid_argument);
  EXPECT_EQ(thrown([&] { (void)client->semaphore("s", 1).try_acquire(); }), errc::invalid_argument);
  for (const std::string key : {"bad:{n}:counter", "bad:{gate}:latch", "bad:{s}:sem"})
    EXPECT_EQ(cli("GET '" + key + "'"), "foreign\n") << key << " was changed";
}

// A waiter that gives up just as a release hands it the lock (the release
// ran between its last attempt and its leaving the queue; the wake-up that
// carries the lock came after it left) gives the lock on: it is not left
// held by nobody until its lease (60 s here) ends. Each wait is a thread of
// its own (an owner that never asks again, which would take its lock back),
// and waits of 1-3 ms against max_barging_wait's 1 ms make handovers to
// waiters that are about to give up frequent.
TEST_F(RedisFault, AWaiterThatGivesUpAsTheLockIsHandedToItLeavesItFree) {
  std::vector<std::shared_ptr<Client>> clients;
  for (int i = 0; i < 2; ++i) clients.push_back(dlock::connect(base_url()));
  std::atomic<int> turns{0}, gave_up{0};
  std::vector<std::thread> workers;
  const auto until = steady::now() + 3s;
  for (int w = 0; w < 4; ++w)
    workers.emplace_back([&, w] {
      for (int i = 0; i < 5'000 && steady::now() < until; ++i)
        std::thread([&] {
          auto m = clients[static_cast<std::size_t>(w % 2)]->mutex("handed", {.lease = 60s});
          if (m.try_lock_for(std::chrono::microseconds(1000 + 500 * (i % 5)))) {
            std::this_thread::sleep_for(std::chrono::microseconds(300));
            m.unlock();
            ++turns;
          } else {
            ++gave_up;
          }
        }).join();
    });
  for (auto& t : workers) t.join();
  std::printf("%d turns, %d waits given up\n", turns.load(), gave_up.load());
  EXPECT_GT(gave_up.load(), 0) << "no wait ran out: the race was not tried";
  auto m = dlock::connect(base_url())->mutex("handed");
  EXPECT_TRUE(m.try_lock_for(scaled(1s))) << "the lock was left held by a waiter that had given up";
}

// While others may still barge past it, the head of the line is woken by
// one release only: a holder that releases and takes the lock again at once
// (its next attempt follows its release on the same connection) beats it
// nearly every time, and waking it at each release would only make it lose
// again. It asks again itself (every 5 ms, and when its bound ends the next
// release hands it the lock). Before, every one of the holder's releases
// woke it: 649 wake-ups for 663 turns of the holder.
TEST_F(RedisFault, AHeadBargedPastIsWokenOnceAndServedByItsBound) {
  auto holder_client = dlock::connect(base_url()), waiter_client = dlock::connect(base_url());
  auto holder = holder_client->mutex("barged");
  std::atomic<bool> stop{false}, held{false};
  std::atomic<int> cycles{0};
  std::thread streak([&] {
    for (int i = 0; i < 100'000 && !stop; ++i) {  // bounded: the waiter ends it within seconds
      holder.lock();
      held = true;
      std::this_thread::sleep_for(200us);
      holder.unlock();
      ++cycles;
    }
  });
  while (!held) std::this_thread::sleep_for(1ms);
  constexpr auto bound = 300ms;
  auto waiter = waiter_client->mutex("barged", {.max_barging_wait = bound});
  const auto wakeups_before = waiter_client->stats().wakeups;
  const int cycles_before = cycles.load();
  const auto start = steady::now();
  const bool got = waiter.try_lock_for(scaled(10s));
  const auto waited = steady::now() - start;
  const auto wakeups = waiter_client->stats().wakeups - wakeups_before;
  const int turns = cycles.load() - cycles_before;  // the holder's, while the waiter waited
  stop = true;
  if (got) waiter.unlock();
  streak.join();
  std::printf("waited %lld ms, woken %llu times, while the holder took it %d times\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()),
              static_cast<unsigned long long>(wakeups), turns);
  ASSERT_TRUE(got) << "the waiter never got the lock";
  EXPECT_LT(waited, bound + scaled(1s)) << "the waiter was not served by its bound";
  // (A poll of the waiter's may find the lock free between a release and the
  // holder's next attempt: then it waited less, and the holder took fewer turns.)
  EXPECT_LE(wakeups, 2u + static_cast<unsigned>(turns) / 10)
      << "the head was woken by release after release while it could only lose";
}

// The other side of waking a beaten head once: when the holder that beat
// it lets the lock go and leaves, no release wakes the head, so it must
// come back by itself soon (it asks again every 5 ms while it may still be
// barged past), not when its long bound ends or its 500 ms safety net.
TEST_F(RedisFault, ALockItsBargerLeftFreeGoesToTheBeatenHeadSoon) {
  auto holder_client = dlock::connect(base_url()), waiter_client = dlock::connect(base_url());
  auto holder = holder_client->mutex("left");
  std::atomic<bool> held{false};
  std::atomic<steady::rep> left_at{0};
  std::thread streak([&] {
    // Three long holds, each release followed at once by the next attempt
    // (the waiter woken by the first loses to it), then it leaves.
    for (int i = 0; i < 3; ++i) {
      holder.lock();
      held = true;
      std::this_thread::sleep_for(60ms);
      if (i == 2) left_at = steady::now().time_since_epoch().count();
      holder.unlock();
    }
  });
  while (!held) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(10ms);
  auto waiter = waiter_client->mutex("left", {.max_barging_wait = 20s});
  const bool got = waiter.try_lock_for(scaled(10s));
  const auto got_at = steady::now();
  if (got) waiter.unlock();
  streak.join();
  ASSERT_TRUE(got) << "the waiter never got the lock its barger left free";
  const auto after = got_at - steady::time_point(steady::duration(left_at.load()));
  std::printf("the waiter took the lock %lld ms after the barger left\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(after).count()));
  EXPECT_LT(after, scaled(150ms)) << "a free lock waited for a head that no release woke";
}

// wait_replicas on a server with no replicas: WAIT gets no acknowledgement,
// so every acquisition is released and fails with unavailable — the lock is
// left free, not held.
TEST_F(RedisFault, WaitReplicasWithoutReplicasFailsAndLeavesTheLockFree) {
  auto waiting = dlock::connect(base_url() + "?wait_replicas=1&wait_timeout=100ms", {.op_timeout = 1s});
  auto m = waiting->mutex("unreplicated");
  for (int i = 0; i < 2; ++i) {
    try {
      (void)m.try_lock_for(500ms);
      ADD_FAILURE() << "an acquisition no replica acknowledged succeeded";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), errc::unavailable) << e.what();
      EXPECT_NE(std::string(e.what()).find("0 of the 1 replicas"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(cli("HGET 'dlock:{unreplicated}:lock' owner"), "\n") << "the refused lock was left held";
  auto other = dlock::connect(base_url());
  auto taker = other->mutex("unreplicated");
  EXPECT_TRUE(taker.try_lock()) << "the refused lock was not released";
  taker.unlock();
}


}  // namespace
}  // namespace dlock::test
