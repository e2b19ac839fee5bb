// zookeeper_nodes.h — for tests that run ZooKeeper servers of their own
// (ZooKeeperEnsemble): a fixture giving each test a root node of its own,
// and what is really left under a node, read with the C client directly
// (not through dlock). Header only: the tests link the C client
// (zookeeper_mt, with THREADED defined).
#pragma once

#include "child_process.h"
#include "servers.h"
#include "zookeeper_ensemble.h"

#include <gtest/gtest.h>
#include <zookeeper/zookeeper.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace dlock::test {

// The children of `path`, read with the C client directly (not through
// dlock): what is really left on the ensemble.
inline std::optional<std::vector<std::string>> children_of(const std::string& hosts, const std::string& path) {
  zhandle_t* zh = zookeeper_init(hosts.c_str(), nullptr, 5000, nullptr, nullptr, 0);
  if (!zh) return std::nullopt;
  using steady = std::chrono::steady_clock;
  using namespace std::chrono_literals;
  const auto until = steady::now() + scaled(10s);
  while (zoo_state(zh) != ZOO_CONNECTED_STATE && steady::now() < until) std::this_thread::sleep_for(20ms);
  String_vector strings{};
  std::optional<std::vector<std::string>> out;
  int rc = zoo_get_children(zh, path.c_str(), 0, &strings);
  if (rc == ZOK) {
    out.emplace();
    for (int i = 0; i < strings.count; ++i) out->emplace_back(strings.data[i]);
    deallocate_String_vector(&strings);
  } else if (rc == ZNONODE) {
    out.emplace();
  }
  zookeeper_close(zh);
  return out;
}

// How many children `path` has (0 if it doesn't exist), -1 if unknown.
inline int count_children(const std::string& hosts, const std::string& path) {
  auto children = children_of(hosts, path);
  return children ? static_cast<int>(children->size()) : -1;
}

// Each test's nodes under a root of its own; the C client's log quiet.
class ZooKeeperRootTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ::setenv("DLOCK_ZK_LOG", "0", 0); }
  std::string root() const { return "/" + unique_name(dir_.path()); }
  std::string hosts(const ZooKeeperEnsemble& zk) const { return zk.url().substr(5); }
  TempDir dir_;
};

}  // namespace dlock::test
