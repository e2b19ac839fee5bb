// The history checker on hand-made histories: each property it checks is
// shown violated (and caught) and kept (and passed), so a clean nemesis run
// means something.
#include "child_process.h"
#include "history.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;

constexpr std::int64_t A = 101, B = 202;

// Events in the order given; times in ms.
struct Build {
  std::vector<Event> events;
  Build& add(std::int64_t ms, std::int64_t process, const char* op, const char* type, std::uint64_t token = 0,
             std::uint64_t seq = 0, const char* detail = "-") {
    events.push_back({ms * 1000, process, op, type, token, seq, detail});
    return *this;
  }
  // A whole hold: acquire at `from`, one write per seq (1 ms apart), release.
  Build& hold(std::int64_t process, std::uint64_t token, std::int64_t from, std::vector<std::uint64_t> seqs) {
    add(from, process, "acquire", "invoke").add(from, process, "acquire", "ok", token);
    std::int64_t t = from;
    for (auto s : seqs) add(++t, process, "write", "ok", token, s);
    add(t + 1, process, "release", "invoke", token).add(t + 2, process, "release", "ok", token);
    return *this;
  }
  Build& final_ok(std::int64_t from, std::int64_t took = 10) {
    return add(from, 0, "final", "invoke").add(from + took, 0, "final", "ok");
  }
};

const CheckOptions bounds{.acquire_bound = 3000ms, .release_bound = 2000ms, .final_bound = 4000ms};

std::vector<std::string> violations(const Build& b, const CheckOptions& o = bounds) {
  return check_history(b.events, o).violations;
}

bool has(const std::vector<std::string>& vs, const std::string& kind) {
  return std::any_of(vs.begin(), vs.end(), [&](const std::string& v) { return v.starts_with(kind); });
}

TEST(HistoryChecker, TakingTurnsWithGrowingTokensIsClean) {
  Build b;
  b.hold(A, 1, 0, {1, 2}).hold(B, 2, 10, {3}).hold(A, 3, 20, {4, 5}).final_ok(30);
  const auto r = check_history(b.events, bounds);
  EXPECT_TRUE(r.ok()) << r.violations.front();
  EXPECT_EQ(r.acquired, 3u);
  EXPECT_EQ(r.writes_accepted, 5u);
}

TEST(HistoryChecker, InterleavedWritesOfTwoHoldersAreCaught) {
  Build b;
  b.add(0, A, "acquire", "ok", 1).add(1, A, "write", "ok", 1, 1);
  b.add(2, B, "acquire", "ok", 2).add(3, B, "write", "ok", 2, 2);
  b.add(4, A, "write", "ok", 1, 3).final_ok(10);
  EXPECT_TRUE(has(violations(b), "exclusion:"));
}

TEST(HistoryChecker, ATokenNotGreaterThanTheLastIsCaught) {
  Build b;
  b.hold(A, 5, 0, {1}).hold(B, 5, 10, {2}).final_ok(20);
  EXPECT_TRUE(has(violations(b), "tokens:"));
  Build lower;
  lower.hold(A, 5, 0, {1}).hold(B, 3, 10, {2}).final_ok(20);
  EXPECT_TRUE(has(violations(lower), "tokens:"));
}

TEST(HistoryChecker, TheSameGrantAfterAFailedReleaseIsOneHold) {
  Build again;
  again.add(0, A, "acquire", "ok", 6).add(1, A, "write", "ok", 6, 1);
  again.add(2, A, "release", "invoke", 6).add(500, A, "release", "fail", 6, 0, "unavailable");
  again.add(501, A, "acquire", "ok", 6).add(502, A, "write", "ok", 6, 2).add(503, A, "release", "invoke", 6);
  again.hold(B, 7, 600, {3}).final_ok(700);
  EXPECT_TRUE(violations(again).empty()) << violations(again).front();

  Build between;  // another holder's write in between: the old token is stale
  between.add(0, A, "acquire", "ok", 6).add(1, A, "write", "ok", 6, 1).add(2, A, "release", "invoke", 6);
  between.hold(B, 7, 10, {2});
  between.add(501, A, "acquire", "ok", 6).add(502, A, "write", "ok", 6, 3).final_ok(700);
  EXPECT_TRUE(has(violations(between), "tokens:"));
}

// A is overtaken by B's first write at 110 ms while it has not released.
Build overtaken() {
  Build b;
  b.add(0, A, "acquire", "ok", 1).add(10, A, "write", "ok", 1, 1);
  b.add(100, B, "acquire", "ok", 2).add(110, B, "write", "ok", 2, 2);
  return b;
}

TEST(HistoryChecker, AHolderOvertakenWithoutBeingToldLostIsCaught) {
  auto never = overtaken();
  never.add(200, A, "release", "invoke", 1).add(201, A, "release", "ok", 1).final_ok(300);
  EXPECT_TRUE(has(violations(never), "lost:"));

  auto late = overtaken();
  late.add(150, A, "lost", "info", 1).add(151, A, "release", "invoke", 1).final_ok(300);
  EXPECT_TRUE(has(violations(late), "lost:"));

  auto in_time = overtaken();
  in_time.add(105, A, "lost", "info", 1).add(106, A, "release", "invoke", 1).final_ok(300);
  EXPECT_TRUE(violations(in_time).empty()) << violations(in_time).front();
}

TEST(HistoryChecker, AStoppedOrKilledHolderIsExcusedButAPartitionedOneIsNot) {
  auto stopped = overtaken();
  stopped.add(50, A, "nemesis", "start", 0, 0, "pause-client").add(300, A, "nemesis", "stop", 0, 0, "pause-client");
  stopped.add(301, A, "lost", "info", 1).add(302, A, "release", "invoke", 1).final_ok(400);
  EXPECT_TRUE(violations(stopped).empty()) << violations(stopped).front();

  auto killed = overtaken();
  killed.add(50, A, "nemesis", "start", 0, 0, "kill-client").final_ok(400);
  EXPECT_TRUE(violations(killed).empty()) << violations(killed).front();

  auto partitioned = overtaken();
  partitioned.add(50, A, "nemesis", "start", 0, 0, "partition").add(300, A, "nemesis", "stop", 0, 0, "partition");
  partitioned.add(301, A, "release", "invoke", 1).final_ok(400);
  EXPECT_TRUE(has(violations(partitioned), "lost:"));
}

TEST(HistoryChecker, ARefusedWriteOfAHolderNeverToldLostIsCaught) {
  Build b;
  b.add(0, A, "acquire", "ok", 1);
  b.hold(B, 2, 10, {1});
  b.add(20, A, "write", "fail", 1, 2).add(21, A, "release", "invoke", 1).final_ok(30);
  EXPECT_TRUE(has(violations(b), "the resource refused"));

  Build told;
  told.add(0, A, "acquire", "ok", 1);
  told.hold(B, 2, 10, {1});
  told.add(19, A, "lost", "info", 1).add(20, A, "write", "fail", 1, 2).add(21, A, "release", "invoke", 1);
  told.final_ok(30);
  EXPECT_TRUE(violations(told).empty()) << violations(told).front();
}

TEST(HistoryChecker, CallsPastTheirBoundAreCaughtUnlessTheProcessWasStopped) {
  Build slow;
  slow.add(0, A, "acquire", "invoke").add(3500, A, "acquire", "fail", 0, 0, "timeout");
  slow.add(4000, B, "acquire", "invoke").add(4001, B, "acquire", "ok", 1);
  slow.add(4002, B, "release", "invoke", 1).add(6500, B, "release", "ok", 1).final_ok(7000);
  const auto vs = violations(slow);
  EXPECT_EQ(vs.size(), 2u);
  EXPECT_TRUE(has(vs, "an acquire by process 101 took 3500"));
  EXPECT_TRUE(has(vs, "a release by process 202 took 2498"));

  Build stopped;
  stopped.add(0, A, "acquire", "invoke").add(100, A, "nemesis", "start", 0, 0, "pause-client");
  stopped.add(3100, A, "nemesis", "stop", 0, 0, "pause-client").add(3500, A, "acquire", "fail", 0, 0, "timeout");
  stopped.final_ok(4000);
  EXPECT_TRUE(violations(stopped).empty()) << violations(stopped).front();
}

TEST(HistoryChecker, ALeakedHoldIsCaught) {
  Build missing;
  missing.hold(A, 1, 0, {1});
  EXPECT_TRUE(has(violations(missing), "leak: no final"));
  Build failed = missing;
  failed.add(10, 0, "final", "invoke").add(5000, 0, "final", "fail");
  EXPECT_TRUE(has(violations(failed), "leak: the lock could not"));
  Build slow = missing;
  slow.final_ok(10, 4500);
  EXPECT_TRUE(has(violations(slow), "leak: the final acquisition took"));
  EXPECT_TRUE(violations(missing, {}).empty()) << "final_bound 0 asks for no final check";
}

TEST(HistoryChecker, FiguresOfARun) {
  Build b;
  b.add(0, 0, "nemesis", "start", 0, 0, "pause-server").add(1, 0, "nemesis", "stop", 0, 0, "pause-server");
  b.hold(A, 1, 0, {1}).hold(B, 2, 500, {2}).add(600, A, "acquire", "invoke").add(601, A, "acquire", "fail");
  b.final_ok(700);
  const auto r = check_history(b.events, bounds);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.acquires, 3u);
  EXPECT_EQ(r.acquired, 2u);
  EXPECT_EQ(r.faults.at("pause-server"), 1u);
  EXPECT_EQ(r.longest_unavailable_us, 500'000);  // writes at 1 ms and 501 ms
}

TEST(HistoryFile, EventsWrittenByOneWriterReadBackInOrder) {
  TempDir dir;
  const std::string path = dir.path() + "/history";
  {
    HistoryWriter w(path);
    w.append({0, A, "acquire", "ok", 7, 0, "a detail with spaces"});
    w.append({42, B, "write", "fail", 7, 9});
  }
  {
    std::ofstream(path, std::ios::app) << "12 3 cut";  // a line cut short is skipped
  }
  const auto events = read_history(path);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_GT(events[0].t_us, 0);
  EXPECT_EQ(events[0].detail, "a_detail_with_spaces");
  EXPECT_EQ(events[1].t_us, 42);
  EXPECT_EQ(events[1].seq, 9u);
  EXPECT_EQ(format_event(events[1]), "42 202 write fail 7 9 -");
}

// A double grant made by a failover: B is granted (token 2) on the new
// master while A (token 1) still holds on the old one; the fence refuses A's
// next write. `told` ends A's hold: "lost" (told), "release-lost" (its
// release said lock_lost) or "none" (never told).
Build double_grant(std::int64_t b_at, const std::string& told) {
  Build b;
  b.add(0, A, "acquire", "invoke").add(0, A, "acquire", "ok", 1).add(1, A, "write", "ok", 1, 1);
  b.add(5, 0, "nemesis", "start", 0, 0, "failover").add(10, 0, "nemesis", "stop", 0, 0, "failover");
  b.add(b_at, B, "acquire", "invoke").add(b_at, B, "acquire", "ok", 2).add(b_at + 1, B, "write", "ok", 2, 2);
  b.add(b_at + 2, A, "write", "fail", 1);
  if (told == "lost") b.add(b_at + 3, A, "lost", "info", 1);
  b.add(b_at + 4, A, "release", "invoke", 1);
  b.add(b_at + 5, A, "release", told == "release-lost" ? "fail" : "ok", 1, 0,
        told == "release-lost" ? "lock_lost" : "-");
  b.add(b_at + 6, B, "release", "invoke", 2).add(b_at + 7, B, "release", "ok", 2);
  return b.final_ok(b_at + 10);
}

CheckOptions failover_may_double_grant(std::chrono::milliseconds grace) {
  CheckOptions o = bounds;
  o.double_grant_faults = {"failover"};
  o.double_grant_grace = grace;
  return o;
}

TEST(HistoryChecker, ADoubleGrantIsAViolationWhereTheTopologyClaimsNone) {
  const auto vs = violations(double_grant(11, "lost"));
  EXPECT_TRUE(has(vs, "lost:"));
  EXPECT_TRUE(has(vs, "the resource refused"));
}

TEST(HistoryChecker, ADoubleGrantInAFailoverIsCountedWhenTheOldHolderIsTold) {
  for (const char* told : {"lost", "release-lost"}) {
    const auto r = check_history(double_grant(11, told).events, failover_may_double_grant(1000ms));
    EXPECT_TRUE(r.ok()) << told << ": " << r.violations.front();
    EXPECT_EQ(r.double_grants, 2u) << told << ": the overtaking and the refused write";
  }
}

TEST(HistoryChecker, ADoubleGrantInAFailoverWhoseOldHolderIsNeverToldIsCaught) {
  EXPECT_TRUE(has(violations(double_grant(11, "none"), failover_may_double_grant(1000ms)), "lost:"));
}

TEST(HistoryChecker, ADoubleGrantAfterTheFailoverAndItsGraceIsCaught) {
  const auto vs = violations(double_grant(1500, "lost"), failover_may_double_grant(1000ms));
  EXPECT_TRUE(has(vs, "lost:"));
  EXPECT_TRUE(has(vs, "the resource refused"));
}

TEST(HistoryChecker, AFailoverExcusesNoInterleavedAcceptedWrites) {
  Build b;
  b.add(0, A, "acquire", "ok", 1).add(1, A, "write", "ok", 1, 1);
  b.add(5, 0, "nemesis", "start", 0, 0, "failover").add(10, 0, "nemesis", "stop", 0, 0, "failover");
  b.add(11, B, "acquire", "ok", 2).add(12, B, "write", "ok", 2, 2);
  b.add(13, A, "write", "ok", 1, 3).add(14, A, "lost", "info", 1).final_ok(20);
  const auto vs = violations(b, failover_may_double_grant(1000ms));
  EXPECT_TRUE(has(vs, "exclusion:"));
  EXPECT_TRUE(has(vs, "tokens:"));
}

}  // namespace
}  // namespace dlock::test
