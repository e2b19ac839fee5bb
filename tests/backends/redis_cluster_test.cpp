// The redis+cluster:// backend's own behaviour, no fault injected: many
// names spread over every master; seeds of two clusters, and a seed that is
// not a cluster node, refused; bad URLs refused naming the argument (no
// server needed). The RedisClusterFault tests start their own cluster
// (scripts/redis-cluster.sh) in a temp dir.
#include "child_process.h"
#include "redis_cluster_setup.h"
#include "thrown.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;

// (The suite keeps the name it had in tests/fault/redis_cluster_fault_test.cpp:
// CTest's test names use it.)
using RedisClusterFault = OwnRedisCluster;

// Names land on every master, and one client holds locks on all of them at
// once; each command went straight to its slot's master (the client hashes
// as the servers do: no MOVED answered, as Redis 7's errorstats count).
TEST_F(RedisClusterFault, ManyLocksSpreadOverEveryMaster) {
  auto client = dlock::connect(url_, {.op_timeout = 1s});
  std::vector<Mutex> held;
  for (int i = 0; i < 60; ++i) {
    held.push_back(client->mutex("item:" + std::to_string(i), {.lease = 30s}));
    ASSERT_TRUE(held.back().try_lock()) << i;
  }
  for (const auto& port : masters_) {
    const std::string keys = cli(port, "DBSIZE");
    EXPECT_GT(std::stoi(keys.empty() ? "0" : keys), 0) << "no lock on master " << port;
  }
  const auto listed = client->list_locks("item:");
  EXPECT_EQ(listed.size(), 60u);
  for (auto& m : held) m.unlock();
  for (const auto& port : masters_)
    EXPECT_EQ(cli(port, "INFO errorstats").find("errorstat_MOVED"), std::string::npos)
        << "master " << port << " redirected a command: the client's slot differs from the server's";
}

// A seed of another cluster (a lone cluster node: a cluster of its own),
// and a seed that is a plain server, are refused at connect().
TEST_F(RedisClusterFault, SeedsOfTwoClustersOrAPlainServerAreRefused) {
  TempDir other;
  const std::string ports =
      std::string(DLOCK_CLUSTER_SCRIPT).substr(0, std::string(DLOCK_CLUSTER_SCRIPT).rfind('/')) + "/ports.sh";
  const std::string bus = trimmed(shell_output("bash -c 'source " + ports + "; free_port'"));
  const std::string redis_server =
      std::string(DLOCK_CLUSTER_SCRIPT).substr(0, std::string(DLOCK_CLUSTER_SCRIPT).rfind('/')) + "/redis-server.sh";
  // Both stopped however the test ends (before `other` goes).
  struct StopBoth {
    std::string script, dir;
    ~StopBoth() {
      for (const char* which : {"/lone", "/plain"}) (void)shell_output(script + " stop " + dir + which + " 2>&1");
    }
  } stop_both{redis_server, other.path()};
  auto start = [&](const std::string& dir, const std::string& extra) {
    (void)shell_output("REDIS_EXTRA_ARGS='" + extra + "' " + redis_server + " start " + dir + " 2>&1");
    std::ifstream in(dir + "/url");
    std::string url;
    std::getline(in, url);
    return url.substr(url.rfind(':') + 1);
  };
  const std::string lone = start(other.path() + "/lone", "--cluster-enabled yes --cluster-port " + bus +
                                                             " --cluster-config-file " + other.path() + "/nodes.conf");
  const std::string plain = start(other.path() + "/plain", "");
  const std::string seeds = url_.substr(std::string("redis+cluster://").size());
  auto refused = [&](const std::string& url, const std::string& named) {
    expect_thrown_naming([&] { (void)dlock::connect(url, {.op_timeout = 2s}); }, errc::invalid_argument, named, url);
  };
  ASSERT_FALSE(lone.empty());
  ASSERT_FALSE(plain.empty());
  refused("redis+cluster://" + seeds + ",127.0.0.1:" + lone, "different clusters");
  refused("redis+cluster://127.0.0.1:" + plain + "," + seeds, "not a cluster node");
  // A seed that is not there is skipped: the others answer.
  auto client = dlock::connect("redis+cluster://127.0.0.1:1," + seeds, {.op_timeout = 2s});
  auto m = client->mutex("x");
  EXPECT_TRUE(m.try_lock());
  m.unlock();
}

// No server needed: the URL is refused before any I/O, naming the part.
TEST(RedisClusterUrl, BadUrlsAreRefusedNamingTheArgument) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"redis+cluster://", "seed"},
      {"redis+cluster://127.0.0.1:7000,127.0.0.1:7000", "listed twice"},
      {"redis+cluster://127.0.0.1:7000/1", "no path"},
      {"redis+cluster://127.0.0.1:7000?db=1", "no db"},
      {"redis+cluster://127.0.0.1:7000?wait_replicas=1", "wait_replicas"},
      {"redis+cluster://127.0.0.1:7000?prefix=a{b", "prefix"},
      {"redis+cluster://127.0.0.1:7000?colour=blue", "colour"},
  };
  for (const auto& [url, named] : bad)
    expect_thrown_naming([&] { (void)dlock::connect(url, {.op_timeout = 500ms}); }, errc::invalid_argument, named, url);
}

}  // namespace
}  // namespace dlock::test
