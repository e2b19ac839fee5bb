// file_wakeups.h — how many wake-ups handoffs through file://'s line take:
// a release should wake one waiter, not the herd. For the file backend's
// tests and its fault test that takes every inotify instance (header only:
// it needs gtest and dlock, which the tests link).
#pragma once

#include "child_process.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace dlock::test {

// A Semaphore's waiters and a SharedMutex's writers wait in line as a
// Mutex's do: a release wakes the first of them, not every waiter (a herd
// would be 6 + 5 + ... + 1 = 21 wake-ups for six handoffs). `take` holds
// what one thread takes, `give` gives it back.
using Take = std::function<std::function<void()>(Client&, bool& got)>;

inline void expect_one_wakeup_per_handoff(const std::string& what, const Take& take,
                                          const ClientOptions& options = {}) {
  using namespace std::chrono_literals;
  TempDir dir;
  const std::string url = "file://" + dir.path() + "/locks";
  constexpr int waiters = 6;
  auto holder = dlock::connect(url);
  auto waiting = dlock::connect(url, options);
  bool held = false;
  auto give_back = take(*holder, held);
  ASSERT_TRUE(held) << what;
  std::atomic<int> acquired{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < waiters; ++i)
    threads.emplace_back([&] {
      bool got = false;
      auto give = take(*waiting, got);
      if (!got) return;
      ++acquired;
      std::this_thread::sleep_for(50ms);  // the others keep waiting meanwhile
      give();
    });
  std::this_thread::sleep_for(300ms);  // let them all wait
  give_back();
  for (auto& t : threads) t.join();
  ASSERT_EQ(acquired.load(), waiters) << what;
  const auto wakeups = waiting->stats().wakeups;
  std::printf("%s: %llu wake-ups for %d handoffs\n", what.c_str(), static_cast<unsigned long long>(wakeups), waiters);
  EXPECT_GE(wakeups, 1u) << what << ": no wait was ended by a notification";
  EXPECT_LE(wakeups, static_cast<std::uint64_t>(waiters + 2)) << what << ": releases woke a herd";
}

inline std::function<void()> take_permit(Client& c, bool& got) {
  using namespace std::chrono_literals;
  auto s = std::make_shared<Semaphore>(c.semaphore("line/s", 1));
  got = s->try_acquire_for(scaled(20s));
  return [s] { s->release(); };
}

}  // namespace dlock::test
