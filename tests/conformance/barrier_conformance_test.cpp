// Barrier conformance: run on every backend that claims the double barrier
// (BackendUnderTest::barrier), against the real store; plus the refusal on
// every backend that doesn't. Members are separate clients (sessions), in
// threads or in worker processes.
#include "conformance_fixture.h"
#include "thrown.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>

#include <signal.h>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

class BarrierConformance : public ConformanceFixture {
 protected:
  static std::string name() { return name_in("barriers"); }
  // A member in a worker process (tests/support/worker.cpp, "barrier").
  std::unique_ptr<ChildProcess> worker_member(int parties) const {
    return std::make_unique<ChildProcess>(worker({"barrier", url(), name(), std::to_string(parties)}));
  }
};

// Starts `call` on a thread of its own; its future says when it returned.
template <class F>
auto in_thread(F call) {
  return std::async(std::launch::async, std::move(call));
}

// Runs `step` for each member on a thread of its own, all at once; true if
// it returned true for every one.
template <class Step>
bool together(const std::vector<Barrier*>& members, Step step) {
  std::vector<std::future<bool>> calls;
  for (auto* m : members) calls.push_back(in_thread([m, &step] { return step(*m); }));
  bool all = true;
  for (auto& c : calls) all = c.get() && all;
  return all;
}

bool enter(Barrier& member) { return member.arrive_and_wait_for(scaled(20s)); }
bool leave(Barrier& member) { return member.leave_for(scaled(20s)); }

// Every backend: those without a barrier say so, before any remote call.
class BarrierSupport : public BarrierConformance {};

TEST_P(BarrierSupport, BarrierOnlyWhereClaimed) {
  auto c = client();
  if (GetParam().barrier) {
    auto alone = c->barrier(name(), 1);
    alone.arrive_and_wait();  // one party: open at once
    EXPECT_TRUE(alone.entered());
    alone.leave();
    EXPECT_FALSE(alone.entered());
  } else {
    EXPECT_EQ(thrown([&] { (void)c->barrier(name(), 2); }), errc::unsupported);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, BarrierSupport, ::testing::ValuesIn(backends_under_test()),
                         [](const auto& param_info) { return param_info.param.name; });

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(BarrierConformance);

TEST_P(BarrierConformance, NobodyEntersBeforeTheLastPartyArrives) {
  constexpr int parties = 3;
  std::vector<std::shared_ptr<Client>> clients{client(), client(), client()};
  std::vector<Barrier> members;
  for (auto& c : clients) members.push_back(c->barrier(name(), parties));
  std::atomic<int> entered{0};
  auto arrive = [&](Barrier& member) {
    return in_thread([&] {
      EXPECT_TRUE(member.arrive_and_wait_for(scaled(30s)));
      entered.fetch_add(1);
      return steady::now();
    });
  };
  std::vector<std::future<steady::time_point>> arrivals;
  arrivals.push_back(arrive(members[0]));
  arrivals.push_back(arrive(members[1]));
  // Give a wrongly opened barrier time to show itself.
  EXPECT_EQ(arrivals[0].wait_for(scaled(500ms)), std::future_status::timeout);
  EXPECT_EQ(arrivals[1].wait_for(0ms), std::future_status::timeout);
  EXPECT_EQ(entered.load(), 0);
  const auto last_arrival = steady::now();
  arrivals.push_back(arrive(members[2]));
  for (auto& a : arrivals) {
    ASSERT_EQ(a.wait_for(scaled(20s)), std::future_status::ready) << "a member was not let in";
    EXPECT_GE(a.get(), last_arrival) << "a member entered before the last party arrived";
  }
  EXPECT_EQ(entered.load(), parties);
  for (auto& m : members) EXPECT_TRUE(m.entered());
  EXPECT_TRUE(together({&members[0], &members[1], &members[2]}, leave));
}

TEST_P(BarrierConformance, LeaveWaitsUntilEveryMemberHasLeft) {
  constexpr int parties = 3;
  std::vector<std::shared_ptr<Client>> clients{client(), client(), client()};
  // Each round another member leaves last. Members are ordered by random
  // names on some stores, so rounds also vary which one waits for whom.
  for (int last = 0; last < parties; ++last) {
    const std::string round = name() + "-" + std::to_string(last);
    std::vector<Barrier> members;
    for (auto& c : clients) members.push_back(c->barrier(round, parties));
    ASSERT_TRUE(together({&members[0], &members[1], &members[2]}, enter));
    std::atomic<int> left{0};
    std::vector<std::future<bool>> leaving;
    for (int i = 0; i < parties; ++i)
      if (i != last)
        leaving.push_back(in_thread([&, i] {
          const bool all = members[i].leave_for(scaled(30s));
          left.fetch_add(1);
          return all;
        }));
    // Give a wrongly finished leave time to show itself.
    EXPECT_EQ(leaving[0].wait_for(scaled(500ms)), std::future_status::timeout) << "round " << last;
    EXPECT_EQ(left.load(), 0) << "a member finished leaving while member " << last << " was still in";
    EXPECT_TRUE(members[last].entered());
    EXPECT_TRUE(members[last].leave_for(scaled(20s))) << "round " << last;
    for (auto& l : leaving) EXPECT_TRUE(l.get()) << "round " << last;
    for (auto& m : members) EXPECT_FALSE(m.entered());
  }
}

TEST_P(BarrierConformance, MembersInOtherProcessesEnterAndLeaveTogether) {
  constexpr int parties = 3;
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int i = 0; i < 2; ++i) {
    workers.push_back(worker_member(parties));
    ASSERT_EQ(workers.back()->read_line(scaled(20s)), "arriving");
  }
  for (auto& w : workers) EXPECT_EQ(w->read_line(scaled(500ms)), std::nullopt) << "a worker entered too early";
  auto c = client();
  auto member = c->barrier(name(), parties);
  ASSERT_TRUE(member.arrive_and_wait_for(scaled(20s)));
  for (auto& w : workers) EXPECT_EQ(w->read_line(scaled(20s)), "entered");
  auto leaving = in_thread([&] { return member.leave_for(scaled(30s)); });
  EXPECT_EQ(leaving.wait_for(scaled(500ms)), std::future_status::timeout) << "left before the workers did";
  for (auto& w : workers) w->write_line("leave");
  for (auto& w : workers) EXPECT_EQ(w->read_line(scaled(20s)), "left");
  EXPECT_TRUE(leaving.get());
}

TEST_P(BarrierConformance, ATimedArrivalEndsAtItsDeadlineAndLeavesNoEntry) {
  auto a = client(), b = client();
  auto member = a->barrier(name(), 2);
  for (auto timeout : {0ms, 300ms, 1200ms}) {
    const auto start = steady::now();
    EXPECT_FALSE(member.arrive_and_wait_for(timeout));
    const auto took = steady::now() - start;
    EXPECT_GE(took, timeout);
    EXPECT_LT(took, timeout + scaled(5s)) << "arrive_and_wait_for overran its deadline";
    EXPECT_FALSE(member.entered());
  }
  EXPECT_FALSE(member.arrive_and_wait_until(std::chrono::system_clock::now() + 100ms));
  // None of those attempts is still in: a second member alone does not fill it.
  auto other = b->barrier(name(), 2);
  EXPECT_FALSE(other.arrive_and_wait_for(scaled(300ms)));
  // Both handles can arrive again, and then fill it together.
  EXPECT_TRUE(together({&member, &other}, enter));
  EXPECT_TRUE(together({&member, &other}, leave));
}

TEST_P(BarrierConformance, AMemberThatDiesBeforeTheBarrierFillsDoesNotCount) {
  auto c = client();
  auto doomed = worker_member(2);
  ASSERT_EQ(doomed->read_line(scaled(20s)), "arriving");
  std::this_thread::sleep_for(scaled(1s));  // its entry is made
  doomed->signal(SIGKILL);
  ASSERT_TRUE(doomed->wait(scaled(10s)).has_value());
  // Its entry lives as long as its session (or lease) at most.
  std::this_thread::sleep_for(c->session_timeout().value_or(0ms) + scaled(1500ms));
  auto member = c->barrier(name(), 2);
  EXPECT_FALSE(member.arrive_and_wait_for(scaled(300ms))) << "a dead member still counted";
  auto other_client = client();
  auto other = other_client->barrier(name(), 2);
  EXPECT_TRUE(together({&member, &other}, enter));
}

TEST_P(BarrierConformance, PartiesIsAThresholdALateMemberGoesThrough) {
  auto a = client(), b = client(), c = client();
  auto first = a->barrier(name(), 2), second = b->barrier(name(), 2), late = c->barrier(name(), 2);
  EXPECT_TRUE(together({&first, &second}, enter));
  EXPECT_TRUE(late.arrive_and_wait_for(0s));  // open: one check
  EXPECT_TRUE(together({&first, &second, &late}, leave));
}

TEST_P(BarrierConformance, TheLastMemberOutShutsItForTheNextRound) {
  auto a = client(), b = client();
  auto first = a->barrier(name(), 2), second = b->barrier(name(), 2);
  for (int round = 0; round < 2; ++round) {
    // Until both have arrived again, nobody goes through.
    EXPECT_FALSE(first.arrive_and_wait_for(scaled(300ms))) << "round " << round;
    EXPECT_TRUE(together({&first, &second}, enter));
    EXPECT_TRUE(together({&first, &second}, leave));
  }
}

TEST_P(BarrierConformance, ATimedLeaveEndsAtItsDeadlineAndLeavesNoEntry) {
  auto a = client(), b = client();
  // Rounds, because on some stores which member waits for which depends on
  // random names: the timed-out one should have been each in turn.
  for (int round = 0; round < 4; ++round) {
    const std::string barrier_name = name() + "-" + std::to_string(round);
    auto first = a->barrier(barrier_name, 2), second = b->barrier(barrier_name, 2);
    ASSERT_TRUE(together({&first, &second}, enter));
    const auto start = steady::now();
    EXPECT_FALSE(first.leave_for(300ms));  // `second` is still in
    EXPECT_GE(steady::now() - start, 300ms);
    EXPECT_LT(steady::now() - start, 300ms + scaled(5s)) << "leave_for overran its deadline";
    EXPECT_FALSE(first.entered());
    EXPECT_EQ(thrown([&] { first.leave(); }), errc::not_owner);
    // `first` has left for good, whichever of them waited for the other.
    const auto second_start = steady::now();
    EXPECT_TRUE(second.leave_for(scaled(20s)));
    EXPECT_LT(steady::now() - second_start, scaled(5s)) << "the timed-out member's entry lingered";
  }
}

TEST_P(BarrierConformance, DestroyingAMemberThatIsInTakesItOut) {
  auto a = client(), b = client();
  auto stays = b->barrier(name(), 2);
  {
    auto goes = a->barrier(name(), 2);
    ASSERT_TRUE(together({&goes, &stays}, enter));
  }
  EXPECT_TRUE(stays.leave_for(scaled(10s)));
}

TEST_P(BarrierConformance, MisuseIsRefusedAndChangesNothing) {
  auto c = client();
  for (int parties : {0, -1}) {
    try {
      (void)c->barrier(name(), parties);
      ADD_FAILURE() << "parties " << parties << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), errc::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("parties"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(thrown([&] { (void)c->barrier("", 2); }), errc::invalid_argument);
  auto member = c->barrier(name(), 2);
  EXPECT_EQ(thrown([&] { member.leave(); }), errc::not_owner);
  EXPECT_EQ(thrown([&] { (void)member.leave_for(0s); }), errc::not_owner);
  // A call while another one on the same handle blocks is refused.
  auto arrival = in_thread([&] { return enter(member); });
  std::this_thread::sleep_for(scaled(300ms));
  EXPECT_EQ(thrown([&] { (void)member.arrive_and_wait_for(0s); }), errc::invalid_argument);
  EXPECT_EQ(thrown([&] { member.leave(); }), errc::invalid_argument);
  auto other_client = client();
  auto other = other_client->barrier(name(), 2);
  ASSERT_TRUE(other.arrive_and_wait_for(scaled(20s)));
  ASSERT_TRUE(arrival.get());
  // In already: arriving again is refused, and it stays in.
  EXPECT_EQ(thrown([&] { member.arrive_and_wait(); }), errc::invalid_argument);
  EXPECT_TRUE(member.entered());
  EXPECT_TRUE(together({&member, &other}, leave));
  EXPECT_EQ(thrown([&] { member.leave(); }), errc::not_owner);
}

INSTANTIATE_TEST_SUITE_P(Backends, BarrierConformance, ::testing::ValuesIn(backends_claiming(&BackendUnderTest::barrier)),
                         [](const auto& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace dlock::test
