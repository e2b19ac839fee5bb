// The lease keeper (core/lease_keeper.h) against a small in-memory LockDriver
// whose renewal answers the test scripts: ok (extend the lease), lock_lost,
// or unavailable. This tests core's timing logic, not a backend.
#include "core/lease_keeper.h"

#include "unit_support.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace dlock::detail {
namespace {

using namespace std::chrono_literals;
using test::eventually;
using test::scaled;

class ScriptedDriver final : public LockDriver {
 public:
  struct Call {
    steady::time_point at;
    std::vector<std::string> names;
  };

  // What renew() answers for a name (default: ok, lease extended).
  void answer(const std::string& name, errc code) {
    std::lock_guard lk(mu_);
    answers_[name] = code;
  }

  std::vector<Call> calls() const {
    std::lock_guard lk(mu_);
    return calls_;
  }
  // Times renew() was asked about `name`.
  std::vector<steady::time_point> renewals_of(const std::string& name) const {
    std::vector<steady::time_point> out;
    for (const auto& c : calls())
      for (const auto& n : c.names)
        if (n == name) out.push_back(c.at);
    return out;
  }

  void renew(std::span<Renewal> batch) override {
    const auto now = steady::now();
    std::lock_guard lk(mu_);
    Call call{now, {}};
    for (auto& r : batch) {
      call.names.push_back(r.request->name);
      auto it = answers_.find(r.request->name);
      errc code = it == answers_.end() ? errc{} : it->second;
      if (code == errc{}) {
        r.grant->valid_until = now + r.request->lease;
        r.outcome = {};
      } else {
        r.outcome = Status(code, "scripted");
      }
    }
    calls_.push_back(std::move(call));
  }

  // The keeper only renews; the rest of the seam is unused here.
  Result<Attempt> try_acquire(const LockRequest&) override { return Status(errc::unsupported, "unused"); }
  std::unique_ptr<Waiter> watch(const LockRequest&) override { return nullptr; }
  Status release(const LockRequest&, Grant&) override { return {}; }
  Status force_release(std::string_view) override { return {}; }
  Result<std::vector<LockInfo>> list(std::string_view) override { return std::vector<LockInfo>{}; }

 private:
  mutable std::mutex mu_;
  std::map<std::string, errc> answers_;
  std::vector<Call> calls_;
};

// A hold as ClientState makes it right after a grant.
std::shared_ptr<HeldLock> make_hold(const std::string& name, std::chrono::milliseconds lease,
                                std::chrono::milliseconds renew_every, LeaseMode mode = LeaseMode::watchdog) {
  auto h = std::make_shared<HeldLock>();
  const auto now = steady::now();
  h->request = LockRequest{name, "owner-1", lease, mode};
  h->grant.token = 1;
  h->grant.valid_until = now + lease;
  h->renew_every = renew_every;
  h->next_renewal = now + renew_every;
  h->set_lease_end(h->grant.valid_until);
  return h;
}

// Records when a hold's stop_token fired.
struct LossWatch {
  explicit LossWatch(const HeldLock& h)
      : callback(h.stop.get_token(), [this] { at.store(steady::now().time_since_epoch().count()); }) {}
  bool fired() const { return at.load() != 0; }
  steady::time_point when() const { return steady::time_point(steady::duration(at.load())); }
  std::atomic<steady::rep> at{0};
  std::stop_callback<std::function<void()>> callback;
};

TEST(LeaseKeeper, RenewsAboutEveryRenewIntervalAndKeepsTheLeaseAlive) {
  ScriptedDriver driver;
  LeaseKeeper keeper(driver);
  const auto every = scaled(60ms);
  auto h = make_hold("a", scaled(400ms), every);
  const auto first_due = h->next_renewal;
  const auto start = first_due - every;  // when the hold was made
  keeper.add(h);
  std::this_thread::sleep_for(scaled(700ms));
  const auto elapsed = steady::now() - start;
  keeper.remove(h.get());

  auto times = driver.renewals_of("a");
  const auto ideal = elapsed / every;
  ASSERT_GE(times.size(), 3u) << "expected about " << ideal << " renewals";
  EXPECT_LE(static_cast<long>(times.size()), ideal + 1) << "renewed more often than renew_interval";
  // Never early: each renewal at least renew_interval after the previous one
  // (less a tenth: the keeper reads its clock just before the driver records
  // the call, and a busy machine can run the one step late, not the other).
  for (std::size_t i = 1; i < times.size(); ++i)
    EXPECT_GE(times[i] - times[i - 1], every - every / 10) << "renewal " << i;
  EXPECT_GE(times[0], first_due);
  EXPECT_FALSE(h->lost.load()) << "a lease renewed in time was marked lost";
  EXPECT_FALSE(h->stop.stop_requested());
  std::lock_guard g(h->mu);
  EXPECT_GT(h->grant.valid_until, start + scaled(400ms)) << "renewals did not extend the lease";
}

TEST(LeaseKeeper, DueRenewalsAreBatched) {
  ScriptedDriver driver;
  LeaseKeeper keeper(driver);
  const auto every = scaled(80ms);
  auto a = make_hold("a", scaled(2000ms), every);
  auto b = make_hold("b", scaled(2000ms), every);
  auto c = make_hold("c", scaled(2000ms), every);
  b->next_renewal = a->next_renewal;
  c->next_renewal = a->next_renewal;
  keeper.add(a);
  keeper.add(b);
  keeper.add(c);
  ASSERT_TRUE(eventually([&] { return driver.calls().size() >= 3; }, 2000ms));
  keeper.remove(a.get());
  keeper.remove(b.get());
  keeper.remove(c.get());
  auto calls = driver.calls();
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(std::set<std::string>(calls[0].names.begin(), calls[0].names.end()),
            (std::set<std::string>{"a", "b", "c"}))
      << "three leases due together were not renewed in one call";
  EXPECT_EQ(keeper.counters().batches, calls.size()) << "counters().batches counts renew() calls";
  std::size_t carried = 0;
  for (const auto& call : calls) carried += call.names.size();
  EXPECT_GT(carried, calls.size()) << "renewals were not batched";
  EXPECT_EQ(keeper.counters().renewals, carried) << "counters().renewals counts leases extended";
}

// Leases taken at different moments converge on one schedule: after the
// first period, one renew() call carries all of them.
TEST(LeaseKeeper, StaggeredLeasesConvergeOnOneBatch) {
  ScriptedDriver driver;
  LeaseKeeper keeper(driver);
  const auto every = scaled(200ms);
  std::vector<std::shared_ptr<HeldLock>> holds;
  for (int i = 0; i < 5; ++i) {
    holds.push_back(make_hold("h" + std::to_string(i), scaled(5000ms), every));
    keeper.add(holds.back());
    std::this_thread::sleep_for(every / 6);  // spread over most of one interval
  }
  std::this_thread::sleep_for(every * 4);
  for (auto& h : holds) keeper.remove(h.get());
  auto calls = driver.calls();
  ASSERT_GE(calls.size(), 2u);
  EXPECT_EQ(calls.back().names.size(), 5u) << "the leases did not converge on one renewal batch";
  std::size_t carried = 0;
  for (const auto& call : calls) carried += call.names.size();
  EXPECT_LE(calls.size(), carried / 3) << "renewals were not coalesced";
}

TEST(LeaseKeeper, HoldsDueAtDifferentTimesAreRenewedOnTheirOwnSchedule) {
  ScriptedDriver driver;
  LeaseKeeper keeper(driver);
  auto fast = make_hold("fast", scaled(1000ms), scaled(50ms));
  auto slow = make_hold("slow", scaled(10000ms), scaled(3000ms));
  keeper.add(fast);
  keeper.add(slow);
  std::this_thread::sleep_for(scaled(400ms));
  keeper.remove(fast.get());
  keeper.remove(slow.get());
  EXPECT_GE(driver.renewals_of("fast").size(), 3u);
  EXPECT_TRUE(driver.renewals_of("slow").empty()) << "a hold was renewed long before it was due";
}

TEST(LeaseKeeper, RefusedRenewalMarksTheHoldLostAtOnce) {
  ScriptedDriver driver;
  driver.answer("refused", errc::lock_lost);
  driver.answer("not-ours", errc::not_owner);
  LeaseKeeper keeper(driver);
  const auto lease = scaled(5000ms);
  auto refused = make_hold("refused", lease, scaled(50ms));
  auto not_ours = make_hold("not-ours", lease, scaled(50ms));
  auto fine = make_hold("fine", lease, scaled(50ms));
  LossWatch watch(*refused);
  const auto start = steady::now();
  keeper.add(refused);
  keeper.add(not_ours);
  keeper.add(fine);
  // lost turns true first, then the stop callbacks run (on the keeper's
  // thread): wait for both.
  ASSERT_TRUE(eventually([&] { return refused->lost.load() && not_ours->lost.load() && watch.fired(); }, 2000ms))
      << "not marked lost, or its stop_token never fired";
  EXPECT_TRUE(refused->stop.stop_requested());
  EXPECT_TRUE(not_ours->stop.stop_requested());
  // At once: right after the first refused renewal, long before the lease ends.
  auto first = driver.renewals_of("refused");
  ASSERT_FALSE(first.empty());
  EXPECT_LT(watch.when() - first[0], scaled(200ms));
  EXPECT_LT(watch.when(), start + lease / 2);
  // A lost hold is not renewed again; the others carry on.
  const auto refused_calls = driver.renewals_of("refused").size();
  const auto fine_calls = driver.renewals_of("fine").size();
  std::this_thread::sleep_for(scaled(300ms));
  EXPECT_EQ(driver.renewals_of("refused").size(), refused_calls);
  EXPECT_EQ(refused_calls, 1u);
  EXPECT_GT(driver.renewals_of("fine").size(), fine_calls);
  EXPECT_FALSE(fine->lost.load());
  keeper.remove(refused.get());
  keeper.remove(not_ours.get());
  keeper.remove(fine.get());
}

TEST(LeaseKeeper, UnavailableRenewalsAreRetriedUntilTheLocalDeadline) {
  ScriptedDriver driver;
  driver.answer("flaky", errc::unavailable);
  LeaseKeeper keeper(driver);
  const auto lease = scaled(600ms);
  const auto every = scaled(100ms);
  auto h = make_hold("flaky", lease, every);
  const auto valid_until = h->grant.valid_until;
  LossWatch watch(*h);
  keeper.add(h);
  // Well before the deadline it is retried, not given up.
  std::this_thread::sleep_for(scaled(300ms));
  EXPECT_FALSE(h->lost.load()) << "marked lost before its lease ran out";
  // lost turns true first, then the stop callbacks run: wait for both.
  ASSERT_TRUE(eventually([&] { return h->lost.load() && watch.fired(); }, 600ms + 1500ms))
      << "never marked lost, or its stop_token never fired";
  EXPECT_GE(watch.when(), valid_until) << "marked lost before valid_until";
  EXPECT_LT(watch.when() - valid_until, scaled(300ms)) << "marked lost long after valid_until";
  // Retried more often than renew_interval while failing.
  auto times = driver.renewals_of("flaky");
  EXPECT_GE(times.size(), 4u);
  for (std::size_t i = 1; i < times.size(); ++i) EXPECT_LT(times[i] - times[i - 1], every + scaled(150ms));
  // No renewal after it was marked lost.
  const auto n = times.size();
  std::this_thread::sleep_for(scaled(200ms));
  EXPECT_EQ(driver.renewals_of("flaky").size(), n);
  keeper.remove(h.get());
}

TEST(LeaseKeeper, RecoversWhenRenewalsSucceedAgainBeforeTheDeadline) {
  ScriptedDriver driver;
  driver.answer("blip", errc::unavailable);
  LeaseKeeper keeper(driver);
  auto h = make_hold("blip", scaled(1500ms), scaled(100ms));
  keeper.add(h);
  ASSERT_TRUE(eventually([&] { return driver.renewals_of("blip").size() >= 2; }, 1000ms));
  driver.answer("blip", errc{});
  const auto healed = steady::now();
  ASSERT_TRUE(eventually(
      [&] {
        std::lock_guard g(h->mu);
        return h->grant.valid_until > healed + scaled(1000ms);
      },
      1000ms));
  std::this_thread::sleep_for(scaled(1700ms) - (steady::now() - healed));
  EXPECT_FALSE(h->lost.load()) << "lost although renewals succeed again";
  keeper.remove(h.get());
}

TEST(LeaseKeeper, FixedLeasesAreNeverRenewedAndAreLostAtValidUntil) {
  ScriptedDriver driver;
  LeaseKeeper keeper(driver);
  auto h = make_hold("fixed", scaled(300ms), scaled(50ms), LeaseMode::fixed);
  const auto valid_until = h->grant.valid_until;
  LossWatch watch(*h);
  keeper.add(h);
  std::this_thread::sleep_for(scaled(150ms));
  EXPECT_FALSE(h->lost.load());
  ASSERT_TRUE(eventually([&] { return h->lost.load(); }, 1500ms));
  EXPECT_GE(watch.when(), valid_until);
  EXPECT_LT(watch.when() - valid_until, scaled(300ms));
  EXPECT_TRUE(driver.calls().empty()) << "a fixed lease was renewed";
  EXPECT_EQ(keeper.counters().batches, 0u);
  EXPECT_EQ(keeper.counters().renewals, 0u);
  keeper.remove(h.get());
}

TEST(LeaseKeeper, NoRenewalAfterRemove) {
  ScriptedDriver driver;
  LeaseKeeper keeper(driver);
  auto gone = make_hold("gone", scaled(1000ms), scaled(40ms));
  auto kept = make_hold("kept", scaled(1000ms), scaled(40ms));
  keeper.add(gone);
  keeper.add(kept);
  ASSERT_TRUE(eventually([&] { return driver.renewals_of("gone").size() >= 1; }, 1000ms));
  keeper.remove(gone.get());
  const auto n = driver.renewals_of("gone").size();
  std::this_thread::sleep_for(scaled(300ms));
  EXPECT_EQ(driver.renewals_of("gone").size(), n) << "renewed after remove()";
  EXPECT_GT(driver.renewals_of("kept").size(), 2u);
  // Removing the last hold of a name while its lease runs out does not mark it lost later.
  EXPECT_FALSE(gone->lost.load());
  keeper.remove(kept.get());
}

// run() copies the due holds and drops its mutex before it locks each hold:
// a remove() in that window must still stop the renewal.
TEST(LeaseKeeper, NoRenewalAfterRemoveEvenIfTheRenewalWasAlreadyDue) {
  ScriptedDriver driver;
  LeaseKeeper keeper(driver);
  auto h = make_hold("racy", scaled(2000ms), scaled(50ms));
  std::unique_lock held(h->mu);  // parks the keeper between picking h up and renewing it
  keeper.add(h);
  std::this_thread::sleep_for(scaled(200ms));
  keeper.remove(h.get());
  held.unlock();
  std::this_thread::sleep_for(scaled(100ms));
  EXPECT_TRUE(driver.renewals_of("racy").empty()) << "renewed after remove() returned";
}

TEST(LeaseKeeper, DestructorJoinsPromptly) {
  ScriptedDriver driver;
  auto h = make_hold("far", 24h, 8h);
  auto lost = make_hold("lost", scaled(1000ms), scaled(10ms));
  lost->mark_lost("a test marks it");
  const auto start = steady::now();
  {
    LeaseKeeper idle(driver);  // waiting with nothing to do
  }
  {
    LeaseKeeper busy(driver);  // waiting for a renewal hours away
    busy.add(h);
    busy.add(lost);
    std::this_thread::sleep_for(scaled(20ms));
  }
  EXPECT_LT(steady::now() - start, scaled(1000ms));
  EXPECT_TRUE(driver.calls().empty());
}

TEST(LeaseKeeper, AFailedRenewalInOneBatchDoesNotAffectTheOthers) {
  ScriptedDriver driver;
  driver.answer("bad", errc::lock_lost);
  LeaseKeeper keeper(driver);
  auto good = make_hold("good", scaled(2000ms), scaled(60ms));
  auto bad = make_hold("bad", scaled(2000ms), scaled(60ms));
  bad->next_renewal = good->next_renewal;
  keeper.add(good);
  keeper.add(bad);
  ASSERT_TRUE(eventually([&] { return bad->lost.load(); }, 1000ms));
  ASSERT_TRUE(eventually([&] { return driver.renewals_of("good").size() >= 3; }, 1000ms));
  EXPECT_FALSE(good->lost.load());
  keeper.remove(good.get());
  keeper.remove(bad.get());
}

}  // namespace
}  // namespace dlock::detail
