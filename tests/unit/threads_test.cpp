// No background thread outlives its Client: after the last Client/Mutex
// handle goes, the process has as many threads as before connect().
#include <dlock/dlock.h>

#include "unit_support.h"

#include <gtest/gtest.h>

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::TempDir;
using test::thread_count;

// Threads before connect(). Starting one thread first lets a sanitizer's
// runtime start its own helper thread (TSan does so lazily), so it is not
// counted against dlock.
std::size_t baseline() {
  std::thread([] {}).join();
  return thread_count();
}

// A joined thread can linger in /proc/self/task for a moment after join.
bool threads_back_to(std::size_t n) {
  return test::eventually([&] { return thread_count() == n; }, 1000ms);
}

TEST(Threads, NoThreadOutlivesTheLastHandle) {
  TempDir dir;
  const auto before = baseline();
  {
    auto client = connect(dir.url());
    auto m = client->mutex("held", {.lease = 1s, .renew_interval = 50ms});
    m.lock();
    std::this_thread::sleep_for(120ms);  // let the keeper renew at least once
    m.unlock();
    m.lock();  // left held: the client's end releases it
  }
  EXPECT_TRUE(threads_back_to(before)) << thread_count() << " threads, " << before << " before connect";
}

TEST(Threads, AMutexKeepsTheClientAliveUntilItGoes) {
  TempDir dir;
  const auto before = baseline();
  std::optional<Mutex> m;
  {
    auto client = connect(dir.url());
    m.emplace(client->mutex("outlives-client"));
  }
  // The mutex still works without the Client object.
  ASSERT_TRUE(m->try_lock());
  m->unlock();
  EXPECT_GT(thread_count(), before) << "the client's state went while a Mutex still refers to it";
  m.reset();
  EXPECT_TRUE(threads_back_to(before)) << thread_count() << " threads, " << before << " before connect";
}

TEST(Threads, ManyClientsComeAndGo) {
  TempDir dir;
  const auto before = baseline();
  for (int i = 0; i < 20; ++i) {
    auto client = connect(dir.url());
    auto m = client->mutex("x");
    std::lock_guard g(m);
  }
  EXPECT_TRUE(threads_back_to(before)) << thread_count() << " threads, " << before << " before connect";
}

TEST(Threads, FailedConnectStartsNoThread) {
  const auto before = baseline();
  EXPECT_FALSE(connect_checked("file://relative").ok());
  EXPECT_FALSE(connect_checked("nosuch://h").ok());
  EXPECT_EQ(thread_count(), before);
}

}  // namespace
}  // namespace dlock
