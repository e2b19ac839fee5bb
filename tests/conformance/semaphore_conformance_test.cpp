// Semaphore conformance: on every backend that claims it
// (BackendUnderTest::semaphore), against the real store; plus the refusal on
// every backend that doesn't. Each test states a guarantee of semaphore.h.
#include "conformance_fixture.h"
#include "thrown.h"
#include "fenced_resource.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>

#include <csignal>
#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

class SemaphoreConformance : public ConformanceFixture {
 protected:
  static std::string name() { return name_in("semaphores"); }
};
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SemaphoreConformance);

TEST_P(SemaphoreConformance, NeverMorePermitsOutThanItHas) {
  constexpr int permits = 3, threads = 8, rounds = 6;
  std::vector<std::shared_ptr<Client>> clients{client(), client(), client(), client()};
  std::atomic<int> inside{0}, most{0}, sections{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      auto semaphore = clients[t % clients.size()]->semaphore(name(), permits);
      for (int i = 0; i < rounds; ++i) {
        std::unique_lock permit(semaphore);  // Lockable: one permit
        const int now = ++inside;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        // Stay until every permit is out (or a bound passes), so that a slow
        // (instrumented) run still fills the semaphore if it lets it fill.
        const auto until = std::chrono::steady_clock::now() + scaled(250ms);
        while (most.load() < permits && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
        std::this_thread::sleep_for(20ms);
        --inside;
        ++sections;
      }
    });
  }
  for (auto& w : workers) w.join();
  EXPECT_EQ(sections.load(), threads * rounds);
  EXPECT_LE(most.load(), permits) << "more holders at once than permits";
  EXPECT_EQ(most.load(), permits) << "8 takers never filled all 3 permits at once";
  EXPECT_EQ(clients[0]->semaphore(name(), permits).in_use(), 0);
}

// A one-permit semaphore is a mutex: fencing tokens grow from holder to
// holder and the oracle sees no overlap, across processes.
TEST_P(SemaphoreConformance, OnePermitExcludesAcrossProcesses) {
  constexpr int processes = 4, sections = 40;
  const std::string resource_path = dir_.path() + "/resource";
  FencedResource resource(resource_path, true);
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int i = 0; i < processes; ++i)
    workers.push_back(std::make_unique<ChildProcess>(std::vector<std::string>{
        DLOCK_TEST_WORKER, "hammer", url(), name(), std::to_string(sections), resource_path, "200", "semaphore"}));
  for (auto& w : workers) EXPECT_EQ(w->wait(scaled(120s)), std::optional<int>(0)) << "worker " << w->pid();
  const auto counts = resource.counts();
  EXPECT_EQ(counts.overlaps, 0u);
  EXPECT_EQ(counts.duplicate_tokens, 0u);
  EXPECT_EQ(counts.stale_rejected, 0u);
  EXPECT_EQ(counts.accepted, static_cast<std::uint64_t>(processes * sections));
  EXPECT_EQ(counts.counter, processes * sections);
}

TEST_P(SemaphoreConformance, TimedAcquireGivesUpAtItsDeadlineAndLeavesNoTrace) {
  auto holder = client()->semaphore(name(), 2);
  holder.acquire();
  holder.acquire();
  EXPECT_EQ(holder.held(), 2);
  auto other = client()->semaphore(name(), 2);
  EXPECT_FALSE(other.try_acquire());
  const auto start = steady::now();
  EXPECT_FALSE(other.try_acquire_for(300ms));
  EXPECT_GE(steady::now() - start, 300ms);
  EXPECT_EQ(other.held(), 0);
  EXPECT_EQ(other.in_use(), 2) << "a taker that gave up left a permit counted";
  holder.release();
  EXPECT_TRUE(other.try_acquire()) << "a released permit was not free";
  EXPECT_EQ(other.in_use(), 2);
  EXPECT_FALSE(holder.try_acquire());
}

TEST_P(SemaphoreConformance, ReleaseWakesAWaiter) {
  auto holder = client()->semaphore(name(), 1);
  holder.acquire();
  auto waiting = std::async(std::launch::async, [&] {
    auto waiter = client()->semaphore(name(), 1);
    waiter.acquire();
    const auto token = waiter.token();
    waiter.release();
    return token;
  });
  EXPECT_EQ(waiting.wait_for(300ms), std::future_status::timeout) << "a waiter got a permit that was held";
  const auto first = holder.token();
  holder.release();
  ASSERT_EQ(waiting.wait_for(scaled(10s)), std::future_status::ready) << "the waiter was not woken";
  EXPECT_GT(waiting.get(), first) << "tokens must grow from holder to holder";
}

// Permits belong to the handle: another thread may give them back, and
// destroying the handle gives back what it still holds.
TEST_P(SemaphoreConformance, PermitsBelongToTheHandleNotTheThread) {
  auto c = client();
  {
    auto semaphore = c->semaphore(name(), 3);
    semaphore.acquire();
    std::thread([&] { semaphore.acquire(); }).join();
    EXPECT_EQ(semaphore.held(), 2);
    std::thread([&] { semaphore.release(); }).join();
    EXPECT_EQ(semaphore.held(), 1);
    semaphore.acquire();
    EXPECT_EQ(semaphore.in_use(), 2);
  }
  EXPECT_EQ(c->semaphore(name(), 3).in_use(), 0) << "destroying the handle kept its permits";
}

TEST_P(SemaphoreConformance, ADeadHoldersPermitComesBack) {
  const std::string resource_path = dir_.path() + "/resource";
  FencedResource resource(resource_path, true);
  // One section that sleeps a minute inside: the permit stays out.
  ChildProcess holder(std::vector<std::string>{DLOCK_TEST_WORKER, "hammer", url(), name(), "1", resource_path,
                                               "60000000", "semaphore"});
  auto semaphore = client()->semaphore(name(), 1);
  ASSERT_TRUE(eventually([&] { return semaphore.in_use() == 1; }, 20s)) << "the worker never took it";
  EXPECT_FALSE(semaphore.try_acquire());
  holder.signal(SIGKILL);
  EXPECT_TRUE(semaphore.try_acquire_for(scaled(20s))) << "a killed holder's permit never came back";
  EXPECT_EQ(semaphore.in_use(), 1);
}

TEST_P(SemaphoreConformance, StatusListsEveryPermitOut) {
  auto c = client();
  auto semaphore = c->semaphore(name(), 3);
  semaphore.acquire();
  const auto first = semaphore.token();
  semaphore.acquire();
  auto listed = c->list_locks(name());
  ASSERT_EQ(listed.size(), 2u);
  for (const auto& l : listed) {
    EXPECT_EQ(l.name, name());
    EXPECT_EQ(l.kind, "permit");
  }
  EXPECT_EQ(listed[0].token, first);
  EXPECT_EQ(listed[1].token, semaphore.token());
  semaphore.release(2);
  EXPECT_TRUE(c->list_locks(name()).empty());
}

TEST_P(SemaphoreConformance, MisuseIsRefusedAndChangesNothing) {
  auto c = client();
  EXPECT_EQ(thrown([&] { (void)c->semaphore(name(), 0); }), errc::invalid_argument);
  EXPECT_EQ(thrown([&] { (void)c->semaphore(name(), -2); }), errc::invalid_argument);
  EXPECT_EQ(thrown([&] { (void)c->semaphore(name(), std::ptrdiff_t{1} << 31); }), errc::invalid_argument);
  EXPECT_EQ(thrown([&] { (void)c->semaphore("", 1); }), errc::invalid_argument);
  auto semaphore = c->semaphore(name(), 2);
  EXPECT_EQ(thrown([&] { semaphore.release(); }), errc::not_owner);
  EXPECT_EQ(thrown([&] { (void)semaphore.token(); }), errc::not_owner);
  EXPECT_EQ(thrown([&] { (void)semaphore.stop_token(); }), errc::not_owner);
  semaphore.acquire();
  EXPECT_EQ(thrown([&] { semaphore.release(0); }), errc::invalid_argument);
  EXPECT_EQ(thrown([&] { semaphore.release(2); }), errc::not_owner);
  EXPECT_EQ(semaphore.release_checked(2).code(), errc::not_owner);
  EXPECT_EQ(semaphore.held(), 1) << "a refused release changed what the handle holds";
  EXPECT_EQ(semaphore.in_use(), 1);
  EXPECT_FALSE(semaphore.lost());
  EXPECT_TRUE(semaphore.release_checked(1).ok());
  EXPECT_EQ(semaphore.in_use(), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, SemaphoreConformance, ::testing::ValuesIn(backends_claiming(&BackendUnderTest::semaphore)),
                         [](const auto& param_info) { return param_info.param.name; });

// Every backend: a semaphore where claimed, errc::unsupported (and no remote
// call) where not.
class SemaphoreSupport : public SemaphoreConformance {};

TEST_P(SemaphoreSupport, SemaphoreIsOfferedExactlyWhereClaimed) {
  auto c = client();
  try {
    auto semaphore = c->semaphore(name(), 2);
    EXPECT_TRUE(GetParam().semaphore) << "semaphore() worked on a backend that does not claim it";
    EXPECT_TRUE(semaphore.try_acquire());
    EXPECT_EQ(semaphore.max(), 2);
  } catch (const Error& e) {
    EXPECT_FALSE(GetParam().semaphore) << e.what();
    EXPECT_EQ(e.kind(), errc::unsupported) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, SemaphoreSupport, ::testing::ValuesIn(backends_under_test()),
                         [](const auto& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace dlock::test
