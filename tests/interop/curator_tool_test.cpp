// The Curator side of the interop tests checked on its own, so that a failing dlock interop
// test points at dlock: two CuratorTool processes exclude each other, their `contend` runs
// leave a consistent counter and disjoint intervals, and the interval check does see an
// overlap when one is made on purpose.
#include "child_process.h"
#include "curator_tool.h"
#include "servers.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;

std::string unique_path(const TempDir& dir) { return "/dlock-interop-test/" + unique_prefix(dir.path()); }

TEST(CuratorTool, TwoMutexProcessesExcludeEachOther) {
  TempDir dir;
  const auto url = server_url("zookeeper");
  const auto path = unique_path(dir);
  ChildProcess a(curator_tool_command({url, "mutex", path}));
  ChildProcess b(curator_tool_command({url, "mutex", path}));
  ASSERT_EQ(a.read_line(scaled(30s)), "ready");
  ASSERT_EQ(b.read_line(scaled(30s)), "ready");

  a.write_line("lock");
  auto first = parse_curator_acquired(a.read_line(scaled(10s)).value_or(""));
  ASSERT_TRUE(first);
  EXPECT_NE(first->node.find("-lock-"), std::string::npos) << first->node;
  b.write_line("try-lock 200");
  EXPECT_EQ(b.read_line(scaled(10s)), "timeout");
  b.write_line("lock");  // queues behind a
  EXPECT_EQ(b.read_line(200ms), std::nullopt);
  a.write_line("unlock");
  EXPECT_EQ(a.read_line(scaled(10s)), "released");
  auto second = parse_curator_acquired(b.read_line(scaled(10s)).value_or(""));
  ASSERT_TRUE(second);
  EXPECT_GT(second->sequence, first->sequence);
  EXPECT_GT(second->czxid, first->czxid);
  b.write_line("quit");
  EXPECT_EQ(b.wait(scaled(10s)), 0);
  a.write_line("quit");
  EXPECT_EQ(a.wait(scaled(10s)), 0);
}

TEST(CuratorTool, ContendingProcessesLeaveNoOverlapAndNoLostUpdate) {
  TempDir dir;
  const auto url = server_url("zookeeper");
  const auto counter = dir.path() + "/counter";
  const auto log = dir.path() + "/intervals";
  constexpr int iterations = 30;
  std::vector<std::unique_ptr<ChildProcess>> javas;
  for (const char* tag : {"J1", "J2"}) {
    javas.push_back(std::make_unique<ChildProcess>(curator_tool_command(
        {"contend", url, unique_path(dir), std::to_string(iterations), counter, log, "--tag", tag, "--work-us", "500",
         "--wait-go"})));
  }
  for (auto& j : javas) ASSERT_EQ(j->read_line(scaled(30s)), "ready");
  for (auto& j : javas) j->write_line("go");
  for (auto& j : javas) EXPECT_EQ(j->read_line(scaled(60s)), "done " + std::to_string(iterations));
  for (auto& j : javas) EXPECT_EQ(j->wait(scaled(10s)), 0);

  EXPECT_EQ(read_counter_file(counter), 2 * iterations);
  auto intervals = read_intervals(log);
  EXPECT_EQ(intervals.size(), 2u * iterations);
  EXPECT_TRUE(overlapping_intervals(intervals).empty());

  // The control: an interval of a holder that ignored the lock is seen.
  const auto& some = intervals.at(intervals.size() / 2);
  append_interval(log, {"C", some.start_ns + 1, some.end_ns + 1});
  EXPECT_FALSE(overlapping_intervals(read_intervals(log)).empty());
}

}  // namespace
}  // namespace dlock::test
