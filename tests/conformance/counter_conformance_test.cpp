// Counter and Latch conformance: run on every backend that claims them
// (BackendUnderTest::counters), against the real store; plus the refusal
// on every backend that doesn't.
#include "conformance_fixture.h"
#include "thrown.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <limits>
#include <set>
#include <thread>
#include <vector>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

constexpr std::int64_t int32_max = std::numeric_limits<std::int32_t>::max();
constexpr std::int64_t int32_min = std::numeric_limits<std::int32_t>::min();

class CounterConformance : public ConformanceFixture {
 protected:
  static std::string name() { return name_in("counters"); }
};

// Every backend: those without counters say so, before any remote call.
class CounterSupport : public CounterConformance {};

TEST_P(CounterSupport, CounterAndLatchOnlyWhereClaimed) {
  auto c = client();
  if (GetParam().counters) {
    auto counter = c->counter(name());
    EXPECT_EQ(counter.fetch_add(2), 0);
    auto latch = c->latch(name() + "-latch", 0);
    EXPECT_TRUE(latch.try_wait());
  } else {
    EXPECT_EQ(thrown([&] { (void)c->counter(name()); }), errc::unsupported);
    EXPECT_EQ(thrown([&] { (void)c->latch(name(), 1); }), errc::unsupported);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, CounterSupport, ::testing::ValuesIn(backends_under_test()),
                         [](const auto& param_info) { return param_info.param.name; });

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CounterConformance);

TEST_P(CounterConformance, AMissingCounterReadsZero) {
  auto c = client();
  EXPECT_EQ(c->counter(name()).load(), 0);
  EXPECT_EQ(c->counter(name()).load(), 0);  // reading created nothing that changes it
}

TEST_P(CounterConformance, FetchAddFromManyClientsAndThreadsLosesNoUpdate) {
  constexpr int clients = 3, threads_per_client = 4, adds = 50;
  std::vector<std::shared_ptr<Client>> cs;
  for (int i = 0; i < clients; ++i) cs.push_back(client());
  std::vector<std::vector<std::int64_t>> seen(clients * threads_per_client);
  std::vector<std::thread> threads;
  for (int t = 0; t < clients * threads_per_client; ++t) {
    threads.emplace_back([&, t] {
      auto counter = cs[t % clients]->counter(name());
      for (int i = 0; i < adds; ++i) seen[t].push_back(counter.fetch_add(1));
    });
  }
  for (auto& t : threads) t.join();
  constexpr std::int64_t total = clients * threads_per_client * adds;
  EXPECT_EQ(cs[0]->counter(name()).load(), total);
  // Each add saw a different value before it: 0 .. total-1, each once.
  std::set<std::int64_t> before;
  for (const auto& s : seen) before.insert(s.begin(), s.end());
  EXPECT_EQ(before.size(), static_cast<std::size_t>(total));
  EXPECT_EQ(*before.begin(), 0);
  EXPECT_EQ(*before.rbegin(), total - 1);
}

TEST_P(CounterConformance, CompareExchangeFailureReportsTheValueAndChangesNothing) {
  auto a = client(), b = client();
  auto counter = a->counter(name());
  counter.store(7);
  std::int64_t expected = 5;
  EXPECT_FALSE(b->counter(name()).compare_exchange(expected, 9));
  EXPECT_EQ(expected, 7);
  EXPECT_EQ(counter.load(), 7);
  EXPECT_TRUE(b->counter(name()).compare_exchange(expected, 9));
  EXPECT_EQ(expected, 7);
  EXPECT_EQ(counter.load(), 9);
}

TEST_P(CounterConformance, CompareExchangeOnAMissingCounterSeesZero) {
  auto counter = client()->counter(name());
  std::int64_t expected = 1;
  EXPECT_FALSE(counter.compare_exchange(expected, 2));
  EXPECT_EQ(expected, 0);
  EXPECT_TRUE(counter.compare_exchange(expected, 2));
  EXPECT_EQ(counter.load(), 2);
}

TEST_P(CounterConformance, StoreAndFetchAddSpanTheWholeInt32Range) {
  auto a = client(), b = client();
  auto counter = a->counter(name());
  counter.store(int32_min);
  EXPECT_EQ(b->counter(name()).load(), int32_min);
  counter.store(int32_max - 1);
  EXPECT_EQ(counter.fetch_add(1), int32_max - 1);
  EXPECT_EQ(b->counter(name()).load(), int32_max);
  EXPECT_EQ(counter.fetch_add(-int32_max), int32_max);
  EXPECT_EQ(counter.load(), 0);
}

TEST_P(CounterConformance, AnInt64CounterSpansTheWholeInt64Range) {
  constexpr std::int64_t int64_max = std::numeric_limits<std::int64_t>::max();
  constexpr std::int64_t int64_min = std::numeric_limits<std::int64_t>::min();
  auto a = client(), b = client();
  auto counter = a->counter(name(), CounterWidth::int64);
  counter.store(int64_min);
  EXPECT_EQ(b->counter(name()).load(), int64_min);
  counter.store(int64_max - 1);
  EXPECT_EQ(counter.fetch_add(1), int64_max - 1);
  // The counter keeps its width: a handle that would have made a 4-byte one
  // reads and writes all 64 bits of it.
  auto narrow = b->counter(name(), CounterWidth::int32);
  EXPECT_EQ(narrow.load(), int64_max);
  EXPECT_EQ(thrown([&] { (void)narrow.fetch_add(1); }), errc::invalid_argument) << "64-bit overflow";
  std::int64_t expected = int64_max;
  EXPECT_TRUE(narrow.compare_exchange(expected, std::int64_t{5'000'000'000}));
  EXPECT_EQ(counter.fetch_add(-5'000'000'000), 5'000'000'000);
  EXPECT_EQ(counter.load(), 0);
}

TEST_P(CounterConformance, AnInt32CounterStaysInt32WhateverTheHandle) {
  auto a = client();
  a->counter(name(), CounterWidth::int32).store(7);
  auto wide = a->counter(name(), CounterWidth::int64);
  EXPECT_EQ(thrown([&] { wide.store(int32_max + 1); }), errc::invalid_argument);
  EXPECT_EQ(wide.fetch_add(1), 7);
  EXPECT_EQ(a->counter(name()).load(), 8);
}

TEST_P(CounterConformance, ValuesBeyondInt32AreRefusedAndChangeNothing) {
  auto counter = client()->counter(name());
  counter.store(5);
  EXPECT_EQ(thrown([&] { counter.store(int32_max + 1); }), errc::invalid_argument);
  EXPECT_EQ(thrown([&] { counter.store(int32_min - 1); }), errc::invalid_argument);
  EXPECT_EQ(thrown([&] { (void)counter.fetch_add(int32_max); }), errc::invalid_argument);
  EXPECT_EQ(thrown([&] { (void)counter.fetch_add(std::numeric_limits<std::int64_t>::max()); }), errc::invalid_argument);
  std::int64_t expected = 5;
  EXPECT_EQ(thrown([&] { (void)counter.compare_exchange(expected, int32_max + 1); }), errc::invalid_argument);
  EXPECT_EQ(counter.load(), 5);
  try {
    counter.store(int32_max + 1);
  } catch (const Error& e) {
    // The message says why (the width), on every backend.
    EXPECT_NE(std::string(e.what()).find("32 bits"), std::string::npos) << e.what();
  }
}

TEST_P(CounterConformance, BadNamesAndCountsAreRefused) {
  auto c = client();
  EXPECT_EQ(thrown([&] { (void)c->counter(""); }), errc::invalid_argument);
  EXPECT_EQ(thrown([&] { (void)c->latch("", 1); }), errc::invalid_argument);
  EXPECT_EQ(thrown([&] { (void)c->latch(name(), -1); }), errc::invalid_argument);
  EXPECT_EQ(thrown([&] { (void)c->latch(name(), int32_max + 1); }), errc::invalid_argument);
  auto latch = c->latch(name(), 1);
  EXPECT_EQ(thrown([&] { (void)c->latch(name(), int32_max + 1); }), errc::invalid_argument);  // exists now
  EXPECT_EQ(thrown([&] { latch.count_down(-1); }), errc::invalid_argument);
  EXPECT_FALSE(latch.try_wait());
}

TEST_P(CounterConformance, LatchWaitersInOtherClientsWaitForEveryCountDown) {
  auto owner = client();
  auto latch = owner->latch(name(), 3);
  std::atomic<int> released{0};
  std::vector<std::future<void>> waiters;
  std::vector<std::shared_ptr<Client>> waiting_clients{client(), client()};
  for (auto& wc : waiting_clients)
    waiters.push_back(std::async(std::launch::async, [&, wc] {
      wc->latch(name(), 3).wait();
      released.fetch_add(1);
    }));
  auto counter_a = client(), counter_b = client();
  counter_a->latch(name(), 3).count_down();
  counter_b->latch(name(), 99).count_down();  // an open latch keeps its count
  EXPECT_FALSE(latch.try_wait());
  // Give a wrongly released waiter time to show itself.
  for (auto& w : waiters) EXPECT_EQ(w.wait_for(scaled(300ms)), std::future_status::timeout);
  EXPECT_EQ(released.load(), 0);
  counter_a->latch(name(), 3).count_down();
  for (auto& w : waiters) ASSERT_EQ(w.wait_for(scaled(20s)), std::future_status::ready) << "a waiter was not woken";
  EXPECT_EQ(released.load(), 2);
  EXPECT_TRUE(latch.try_wait());
  EXPECT_TRUE(latch.wait_for(0s));
}

TEST_P(CounterConformance, LatchWaitForEndsAtItsDeadlineWhileTheCountIsAboveZero) {
  auto latch = client()->latch(name(), 1);
  for (auto timeout : {0ms, 300ms, 1200ms}) {
    const auto start = steady::now();
    EXPECT_FALSE(latch.wait_for(timeout));
    const auto took = steady::now() - start;
    EXPECT_GE(took, timeout);
    EXPECT_LT(took, timeout + scaled(5s)) << "wait_for overran its deadline";
  }
  EXPECT_FALSE(latch.wait_until(std::chrono::system_clock::now() + 100ms));
  EXPECT_FALSE(latch.try_wait());
}

TEST_P(CounterConformance, LatchCountDownStopsAtZero) {
  auto a = client(), b = client();
  auto latch = a->latch(name(), 2);
  latch.count_down(5);
  EXPECT_TRUE(latch.try_wait());
  auto later = b->latch(name(), 10);  // exists, at 0: stays open
  EXPECT_TRUE(later.try_wait());
  later.count_down();
  later.count_down(0);
  EXPECT_TRUE(later.try_wait());
  later.wait();
  // The remaining count is a counter in the same encoding.
  EXPECT_EQ(b->counter(name()).load(), 0);
}

TEST_P(CounterConformance, LatchArriveAndWaitReleasesEveryParty) {
  constexpr int parties = 3;
  std::vector<std::future<void>> arrivals;
  for (int i = 0; i < parties; ++i)
    arrivals.push_back(std::async(std::launch::async, [&] {
      auto c = client();
      c->latch(name(), parties).arrive_and_wait();
    }));
  for (auto& a : arrivals) ASSERT_EQ(a.wait_for(scaled(20s)), std::future_status::ready);
  for (auto& a : arrivals) a.get();  // rethrows a party's error
  EXPECT_EQ(client()->counter(name()).load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, CounterConformance, ::testing::ValuesIn(backends_claiming(&BackendUnderTest::counters)),
                         [](const auto& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace dlock::test
