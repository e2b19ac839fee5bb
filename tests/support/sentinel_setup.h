// sentinel_setup.h — a test fixture that runs a Sentinel setup of its own
// for each test (scripts/redis-sentinel.sh, path in DLOCK_SENTINEL_SCRIPT:
// 1 master, 2 replicas, 3 sentinels, quorum 2, down-after-milliseconds
// 1000, in a temp dir), stopped at the end: for the tests that fail the
// master over, stop or kill nodes, or read each node with redis-cli.
// Header only: it needs gtest, which the tests link.
#pragma once

#include "child_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace dlock::test {

class OwnSentinelSetup : public ::testing::Test {
 protected:
  void SetUp() override {
    auto out = script("start");
    std::ifstream in(dir_.path() + "/url");
    ASSERT_TRUE(std::getline(in, url_)) << "the sentinel setup did not start: " << out;
    std::ifstream env(dir_.path() + "/env");
    for (std::string line; std::getline(env, line);) {
      if (line.starts_with("NODE_PORTS=")) {
        std::istringstream ports(line.substr(12, line.size() - 13));
        for (std::string p; ports >> p;) nodes_.push_back(p);
      }
    }
    ASSERT_EQ(nodes_.size(), 3u);
  }
  void TearDown() override {
    for (const auto& port : nodes_) signal_node(port, SIGCONT);
    (void)script("stop");
  }

  // `s` without the line ends and spaces at its end (redis-cli's output).
  static std::string trimmed(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }
  std::string script(const std::string& command) {
    return shell_output(std::string(DLOCK_SENTINEL_SCRIPT) + " " + command + " " + dir_.path() + " 2>&1");
  }
  // The master's port as the sentinels see it.
  std::string master() { return trimmed(script("master")); }
  std::vector<std::string> replicas() {
    const std::string m = master();
    std::vector<std::string> out;
    for (const auto& p : nodes_)
      if (p != m) out.push_back(p);
    return out;
  }
  void signal_node(const std::string& port, int sig) {
    std::ifstream in(dir_.path() + "/node-" + port + ".pid");
    pid_t pid = 0;
    if (!(in >> pid && pid > 0)) return;
    if (sig == SIGSTOP) EXPECT_TRUE(stop_process(pid)) << "node " << port << " did not stop";  // every thread, not just the signal sent
    else ::kill(pid, sig);
  }
  std::string cli(const std::string& port, const std::string& args) {
    return trimmed(shell_output("timeout 5 redis-cli -h 127.0.0.1 -p " + port + " " + args + " 2>/dev/null"));
  }

  TempDir dir_;
  std::string url_;
  std::vector<std::string> nodes_;
};

}  // namespace dlock::test
