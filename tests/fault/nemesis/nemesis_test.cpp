// The nemesis suite: every backend of this build under each group of the
// faults it claims to survive (a short seeded schedule each), plus the
// control run that shows the checker catches a run without the lock.
// DLOCK_NEMESIS_SEED replays a schedule (the seed is printed).
#include "client_network.h"
#include "nemesis.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;

std::uint64_t seed() {
  static const std::uint64_t s = []() -> std::uint64_t {
    if (const char* env = std::getenv("DLOCK_NEMESIS_SEED")) return std::stoull(env);
    return static_cast<std::uint64_t>(std::random_device{}());
  }();
  return s;
}

// One test: a backend under one group of faults.
struct Scenario {
  std::string backend;
  std::string group;  // process, server, partition (and lossy-network); mixed: every fault the backend claims
  std::vector<Fault> faults;
};

void PrintTo(const Scenario& s, std::ostream* os) { *os << s.backend << "/" << s.group; }

std::vector<Scenario> scenarios() {
  std::vector<Scenario> all;
  for (const auto& b : nemesis_backends()) {
    if (b.mixed_case) {
      auto fs = b.faults;
      if (!ClientNetwork::unavailable_reason().empty()) std::erase(fs, Fault::partition);
      if (!ClientNetwork::degrade_unavailable_reason().empty()) std::erase(fs, Fault::lossy_network);
      all.push_back({b.name, "mixed", fs});
      continue;
    }
    auto claims = [&](std::initializer_list<Fault> fs) {
      std::vector<Fault> out;
      for (Fault f : fs)
        if (std::find(b.faults.begin(), b.faults.end(), f) != b.faults.end()) out.push_back(f);
      return out;
    };
    if (auto fs = claims({Fault::pause_client, Fault::kill_client}); !fs.empty()) all.push_back({b.name, "process", fs});
    if (auto fs = claims({Fault::pause_server, Fault::restart_server}); !fs.empty()) all.push_back({b.name, "server", fs});
    if (auto fs = claims({Fault::partition, Fault::lossy_network}); !fs.empty()) all.push_back({b.name, "partition", fs});
  }
  return all;
}

std::string summary(const NemesisReport& r) {
  std::string s = "seed " + std::to_string(seed()) + ": " + std::to_string(r.check.acquired) + " holds, " +
                  std::to_string(r.check.writes_accepted) + " writes accepted, " +
                  std::to_string(r.check.writes_rejected) + " refused, " + std::to_string(r.check.lost) +
                  " lost, " + std::to_string(r.check.double_grants) + " double grants; faults:";
  for (const auto& [kind, n] : r.check.faults) s += " " + kind + "=" + std::to_string(n);
  return s;
}

class Nemesis : public ::testing::TestWithParam<Scenario> {};

TEST_P(Nemesis, NoTwoHoldersNoLeakBoundedCalls) {
  const Scenario& s = GetParam();
  std::vector<Fault> faults = s.faults;
  if (s.group == "partition") {
    // A kernel without the statistic match or tbf still runs the partitions.
    if (auto why = ClientNetwork::degrade_unavailable_reason(); !why.empty()) {
      std::erase(faults, Fault::lossy_network);
      std::cout << "[ nemesis ] no lossy network: " << why << "\n";
    }
    if (auto why = ClientNetwork::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  }
  // A mixed case has one store start for every kind: a shorter schedule (CI time).
  NemesisOptions options{.faults = faults, .run = s.group == "mixed" ? 4s : 6s, .seed = seed()};
  const auto report = run_nemesis(*find_nemesis_backend(s.backend), options);
  ASSERT_TRUE(report.error.empty()) << report.error;
  std::cout << "[ nemesis ] " << s.backend << "/" << s.group << " " << summary(report) << "\n";
  std::string violations;
  for (const auto& v : report.check.violations) violations += "  " + v + "\n";
  EXPECT_TRUE(report.check.ok()) << summary(report) << "\n" << violations << "history:\n" << report.history;
  EXPECT_GT(report.check.writes_accepted, 0u) << "no work was done: the run proves nothing";
  EXPECT_GT(report.check.faults.size(), 0u) << "no fault was injected";
}

INSTANTIATE_TEST_SUITE_P(Backends, Nemesis, ::testing::ValuesIn(scenarios()),
                         [](const auto& param_info) { return param_info.param.backend + "_" + param_info.param.group; });

// The control run: the same workers without the lock. The checker must see
// two holders at once and tokens that do not grow, or the suite could pass
// without proving anything.
TEST(NemesisControl, WithoutTheLockTheCheckerReportsViolations) {
  const NemesisBackend* file = find_nemesis_backend("file");
  if (!file) GTEST_SKIP() << "the control run uses the file backend";
  const auto report = run_nemesis(*file, {.faults = {}, .run = 3s, .seed = seed(), .lock = false});
  ASSERT_TRUE(report.error.empty()) << report.error;
  auto found = [&](const std::string& kind) {
    return std::any_of(report.check.violations.begin(), report.check.violations.end(),
                       [&](const std::string& v) { return v.starts_with(kind); });
  };
  EXPECT_TRUE(found("exclusion:")) << summary(report);
  EXPECT_TRUE(found("tokens:")) << summary(report);
}

}  // namespace
}  // namespace dlock::test
