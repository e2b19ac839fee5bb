// redis_cluster_setup.h — a test fixture that runs a Redis Cluster of its
// own for each test (scripts/redis-cluster.sh, path in
// DLOCK_CLUSTER_SCRIPT, REPLICAS=1: 3 masters, 1 replica each, in a temp
// dir), stopped at the end: for the tests that move slots, fail a master
// over, stop or kill one, or read each master with redis-cli. Header only:
// it needs gtest, which the tests link.
#pragma once

#include "child_process.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace dlock::test {

class OwnRedisCluster : public ::testing::Test {
 protected:
  // `s` without the line ends and spaces at its end (redis-cli's output).
  static std::string trimmed(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
    return s;
  }
  // What redis-cli says to the node on `port`, trimmed.
  static std::string cli(const std::string& port, const std::string& args) {
    return trimmed(shell_output("timeout 5 redis-cli -h 127.0.0.1 -p " + port + " " + args + " 2>/dev/null"));
  }

  void SetUp() override {
    auto out = script("start");  // (CLUSTER_NODE_TIMEOUT_MS: node_timeout_ms_)
    std::ifstream in(dir_.path() + "/url");
    ASSERT_TRUE(std::getline(in, url_)) << "the cluster did not start: " << out;
    std::ifstream env(dir_.path() + "/env");
    for (std::string line; std::getline(env, line);) {
      if (line.starts_with("MASTER_PORTS=")) {
        std::istringstream ports(line.substr(14, line.size() - 15));
        for (std::string p; ports >> p;) masters_.push_back(p);
      }
    }
    ASSERT_EQ(masters_.size(), 3u);
  }
  void TearDown() override { (void)script("stop"); }

  std::string script(const std::string& args) {
    return shell_output("REPLICAS=1 CLUSTER_NODE_TIMEOUT_MS=" + node_timeout_ms_ + " " + std::string(DLOCK_CLUSTER_SCRIPT) + " " +
                        args.substr(0, args.find(' ')) + " " + dir_.path() +
                        (args.find(' ') == std::string::npos ? "" : args.substr(args.find(' '))) + " 2>&1");
  }
  // The slot of a lock name's keys, and the master serving it.
  std::string slot_of(const std::string& name) { return cli(masters_[0], "CLUSTER KEYSLOT '" + name + "'"); }
  std::string master_of(const std::string& slot) { return trimmed(script("master-of " + slot)); }

  TempDir dir_;
  std::string node_timeout_ms_ = "3000";
  std::string url_;
  std::vector<std::string> masters_;
};

}  // namespace dlock::test
