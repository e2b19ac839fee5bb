// Core's acquire loop (core/acquire.h) against a small in-memory LockDriver
// whose answers the test scripts. This tests core's logic, not a backend.
#include "core/acquire.h"

#include <gtest/gtest.h>

#include <deque>

namespace dlock::detail {
namespace {

using namespace std::chrono_literals;

// try_acquire() answers grants from a script, in order; releases are noted.
class ScriptedGrants final : public LockDriver {
 public:
  // A grant of `token` whose lease ends `valid_for` after it is answered
  // (negative: it had ended before the answer was read).
  void then_grant(std::uint64_t token, std::chrono::milliseconds valid_for) {
    script_.push_back({token, valid_for});
  }
  const std::vector<std::uint64_t>& released() const { return released_; }
  int attempts() const { return attempts_; }

  Result<Attempt> try_acquire(const LockRequest&) override {
    ++attempts_;
    if (script_.empty()) return Attempt(Busy{});
    auto [token, valid_for] = script_.front();
    script_.pop_front();
    Grant g;
    g.token = token;
    g.valid_until = steady::now() + valid_for;
    return Attempt(std::move(g));
  }
  Status release(const LockRequest&, Grant& grant) override {
    released_.push_back(grant.token);
    return {};
  }
  std::unique_ptr<Waiter> watch(const LockRequest&) override { return nullptr; }
  void renew(std::span<Renewal>) override {}
  Status force_release(std::string_view) override { return {}; }
  Result<std::vector<LockInfo>> list(std::string_view) override { return std::vector<LockInfo>{}; }

 private:
  std::deque<std::pair<std::uint64_t, std::chrono::milliseconds>> script_;
  std::vector<std::uint64_t> released_;
  int attempts_ = 0;
};

// A grant read after its lease ran out (the process stood still between
// the request and the answer: the store may have given the lock to another
// since) is no hold: it is let go, and the next attempt's grant is the one
// returned.
TEST(Acquire, AGrantReadAfterItsLeaseRanOutIsReleasedAndAskedAgain) {
  ScriptedGrants driver;
  driver.then_grant(1, -1ms);
  driver.then_grant(2, 30s);
  LockRequest request{"stale", "owner-1", 30s};
  std::atomic<std::uint64_t> wakeups{0};
  auto got = acquire(driver, request, steady::now() + 5s, ClientOptions{}, wakeups);
  ASSERT_TRUE(got) << got.status().message();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->token, 2u);
  EXPECT_EQ(driver.released(), std::vector<std::uint64_t>{1});
  EXPECT_EQ(driver.attempts(), 2);
}

// A grant with lease left is returned as it is, and nothing is released.
TEST(Acquire, AGrantWithLeaseLeftIsTheHold) {
  ScriptedGrants driver;
  driver.then_grant(7, 30s);
  LockRequest request{"fresh", "owner-1", 30s};
  std::atomic<std::uint64_t> wakeups{0};
  auto got = acquire(driver, request, steady::now() + 5s, ClientOptions{}, wakeups);
  ASSERT_TRUE(got && got->has_value());
  EXPECT_EQ((*got)->token, 7u);
  EXPECT_TRUE(driver.released().empty());
}

}  // namespace
}  // namespace dlock::detail
