// The file:// backend's own behaviour, no fault injected: handoffs through
// the line leave no file or descriptor behind and serve more waiters than
// it has places, observers waiting for a leader do not wake each other,
// the client's threads are named, `dlock status` lists every kind held,
// and a release wakes one waiter, not the herd. Each test uses a lock dir
// of its own in a temp dir.
#include "child_process.h"
#include "file_wakeups.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// Handoffs through the line leave nothing behind: one file per name, and
// once the clients are gone, no descriptor (doorbells, places, pooled ones).
TEST(FileMutex, HandoffsLeaveNoFileOrDescriptorBehind) {
  TempDir dir;
  const std::string url = "file://" + dir.path() + "/locks";
  auto descriptors = [] {
    return std::distance(std::filesystem::directory_iterator("/proc/self/fd"), std::filesystem::directory_iterator());
  };
  const auto before = descriptors();
  constexpr int names = 20;
  {
    auto a = dlock::connect(url), b = dlock::connect(url);
    for (int i = 0; i < names; ++i) {
      auto held = a->mutex("leak/" + std::to_string(i));
      held.lock();
      std::atomic<bool> got{false};
      std::thread next([&] {
        auto m = b->mutex("leak/" + std::to_string(i));
        got = m.try_lock_for(scaled(10s));
        if (got) m.unlock();
      });
      std::this_thread::sleep_for(scaled(30ms));  // it waits in line
      held.unlock();
      next.join();
      ASSERT_TRUE(got) << "name " << i;
    }
    EXPECT_GE(b->stats().wakeups, static_cast<std::uint64_t>(names) / 2) << "the handoffs were not woken by releases";
  }
  EXPECT_EQ(
      std::distance(std::filesystem::directory_iterator(dir.path() + "/locks"), std::filesystem::directory_iterator()),
      names);
  EXPECT_EQ(descriptors(), before) << "descriptors left open after the clients went";
}

// More waiters than the line has places (128): the others wait without
// one, and every release then wakes them all, as before the line. All are
// served, one at a time.
TEST(FileMutex, MoreWaitersThanPlacesInLineAreAllServed) {
  TempDir dir;
  const std::string url = "file://" + dir.path() + "/locks";
  auto a = dlock::connect(url), b = dlock::connect(url);
  auto held = a->mutex("crowd");
  held.lock();
  constexpr int waiters = 140;
  std::atomic<int> served{0}, inside{0};
  std::atomic<bool> overlapped{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < waiters; ++i)
    threads.emplace_back([&] {
      auto m = b->mutex("crowd");
      if (!m.try_lock_for(scaled(60s))) return;
      if (inside.fetch_add(1) != 0) overlapped = true;
      std::this_thread::sleep_for(100us);
      inside.fetch_sub(1);
      ++served;
      m.unlock();
    });
  std::this_thread::sleep_for(scaled(1s));  // they all wait, 12 of them without a place
  held.unlock();
  for (auto& t : threads) t.join();
  EXPECT_EQ(served.load(), waiters);
  EXPECT_FALSE(overlapped.load()) << "two waiters held the lock at once";
  EXPECT_EQ(b->stats().failed_releases, 0u);
}

// Observers waiting for a leader change sleep in the kernel: one observer's
// read must not wake the others (which would read, and wake it, in turn).
TEST(FileElection, WaitingObserversDoNotWakeEachOther) {
  TempDir dir;
  const std::string url = "file://" + dir.path() + "/locks";
  auto leading = dlock::connect(url);
  auto leader = leading->election("observed");
  leader.campaign("the-leader");
  // Read system calls made by this process so far (/proc/self/io).
  auto reads = [] {
    std::ifstream io("/proc/self/io");
    std::string key;
    std::uint64_t value = 0;
    while (io >> key >> value)
      if (key == "syscr:") return value;
    return std::uint64_t{0};
  };
  const auto before = reads();
  std::vector<std::thread> observers;
  for (int i = 0; i < 3; ++i)
    observers.emplace_back([&] {
      auto c = dlock::connect(url);
      auto watch = c->election("observed");
      EXPECT_EQ(watch.wait_leader_change_for("the-leader", 1s), "the-leader");
    });
  for (auto& t : observers) t.join();
  // Each observer reads the leader a few times (at the start, each 500 ms
  // safety net); woken by each other's reads they would read hundreds of times.
  const auto made = reads() - before;
  std::printf("%llu read calls by 3 observers in 1 s\n", static_cast<unsigned long long>(made));
  EXPECT_LT(made, 200u) << "observers waiting for a change woke each other";
  leader.resign();
}

// The threads a client starts say whose they are (top -H, gdb, /proc).
TEST(FileThreads, TheClientsThreadsAreNamedDlock) {
  TempDir dir;
  auto c = dlock::connect("file://" + dir.path() + "/locks");
  auto held = c->mutex("named");
  held.lock();  // a watchdog lease: the lease keeper runs
  auto other = c->mutex("named-async");
  Hold hold = other.async_lock().get();  // the async API's thread runs
  // (A thread names itself as it starts, which may come a moment later.)
  std::string names;
  EXPECT_TRUE(eventually(
      [&] {
        names = thread_names();
        return names.find("dlock-keeper") != std::string::npos && names.find("dlock-async") != std::string::npos;
      },
      scaled(2s)))
      << names;
  hold.unlock();
  held.unlock();
}

// What `dlock status` shows: every kind held on file://, one line per
// holder, and nothing once they are given back.
TEST(FileStatus, ListsEveryKindHeld) {
  TempDir dir;
  const std::string url = "file://" + dir.path() + "/locks";
  auto a = dlock::connect(url), b = dlock::connect(url);
  auto mutex = a->mutex("status/mutex");
  auto writer = a->shared_mutex("status/written");
  auto reader = a->shared_mutex("status/read"), other_reader = b->shared_mutex("status/read");
  auto semaphore = a->semaphore("status/permits", 3);
  auto election = a->election("status/leader");
  auto member = a->barrier("status/barrier", 1);
  auto counter = a->counter("status/counter");
  mutex.lock();
  writer.lock();
  reader.lock_shared();
  other_reader.lock_shared();
  semaphore.acquire();
  semaphore.acquire();
  election.campaign("the-leader");
  member.arrive_and_wait();
  counter.store(5);  // a value, not a holder: not listed
  std::multiset<std::pair<std::string, std::string>> listed;
  for (const auto& l : a->list_locks("status/")) listed.insert({l.name, l.kind});
  const std::multiset<std::pair<std::string, std::string>> expected{
      {"status/barrier", "member"}, {"status/leader", "leader"},  {"status/mutex", "mutex"},
      {"status/permits", "permit"}, {"status/permits", "permit"}, {"status/read", "read"},
      {"status/read", "read"},      {"status/written", "write"}};
  EXPECT_EQ(listed, expected);
  mutex.unlock();
  writer.unlock();
  reader.unlock_shared();
  other_reader.unlock_shared();
  semaphore.release(2);
  election.resign();
  member.leave();
  EXPECT_TRUE(a->list_locks("status/").empty());
}

TEST(FileLine, ASemaphoreReleaseWakesOneWaiter) { expect_one_wakeup_per_handoff("semaphore", take_permit); }

TEST(FileLine, AWriterReleaseWakesOneWriter) {
  expect_one_wakeup_per_handoff("writer", [](Client& c, bool& got) -> std::function<void()> {
    auto rw = std::make_shared<SharedMutex>(c.shared_mutex("line/rw"));
    got = rw->try_lock_for(scaled(20s));
    return [rw] { rw->unlock(); };
  });
}

TEST(FileLine, ALeadersResignationWakesOneCandidate) {
  expect_one_wakeup_per_handoff("election", [](Client& c, bool& got) -> std::function<void()> {
    auto e = std::make_shared<Election>(c.election("line/e"));
    got = e->campaign_for(scaled(20s));
    return [e] { e->resign(); };
  });
}

// Readers and writers waiting together: the writers go in line, the readers
// are woken together when a writer leaves; everyone gets in well before
// core's 500 ms safety-net retries would have to step in for a lost wake-up.
TEST(FileLine, ReadersAndWritersWaitingTogetherAllGetIn) {
  TempDir dir;
  const std::string url = "file://" + dir.path() + "/locks";
  auto holder = dlock::connect(url);
  auto rw = holder->shared_mutex("line/mixed");
  rw.lock();
  std::atomic<int> readers{0}, writers{0};
  std::vector<std::thread> threads;
  auto waiting = dlock::connect(url);
  for (int i = 0; i < 6; ++i)
    threads.emplace_back([&, i] {
      auto mine = waiting->shared_mutex("line/mixed");
      if (i % 2 == 0) {
        if (!mine.try_lock_for(scaled(20s))) return;
        ++writers;
        std::this_thread::sleep_for(20ms);
        mine.unlock();
      } else {
        if (!mine.try_lock_shared_for(scaled(20s))) return;
        ++readers;
        std::this_thread::sleep_for(20ms);
        mine.unlock_shared();
      }
    });
  std::this_thread::sleep_for(300ms);
  const auto released = steady::now();
  rw.unlock();
  for (auto& t : threads) t.join();
  const auto took = steady::now() - released;
  EXPECT_EQ(writers.load(), 3);
  EXPECT_EQ(readers.load(), 3);
  // Three writers one after the other and the readers: about 80 ms of holds.
  EXPECT_LT(took, scaled(450ms)) << "someone waited for a safety-net retry: a wake-up was lost";
}

}  // namespace
}  // namespace dlock::test
