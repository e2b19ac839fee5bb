// The redis+sentinel:// backend's own behaviour, no fault injected: with
// wait_replicas, handovers are acknowledged as acquisitions are; an unknown
// master name is refused naming it; bad URLs are refused naming the
// argument (no server needed). The RedisSentinelFault tests start their own
// Sentinel setup (scripts/redis-sentinel.sh) in a temp dir.
#include "child_process.h"
#include "fenced_resource.h"
#include "sentinel_setup.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;

// (The suite keeps the name it had in tests/fault/redis_sentinel_fault_test.cpp:
// CTest's test names use it.)
using RedisSentinelFault = OwnSentinelSetup;

// With wait_replicas, a lock a release hands straight to a waiter (fair
// mode: every time) is taken again under a new token and waited for, like
// any acquisition: turns go on, every hold fenced, none twice.
TEST_F(RedisSentinelFault, WaitReplicasHandoversAreAcknowledgedToo) {
  FencedResource resource(dir_.path() + "/resource", true);
  auto client = dlock::connect(url_ + "?wait_replicas=2&wait_timeout=1s", {.op_timeout = 3s});
  constexpr int turns = 20;
  std::atomic<int> failures{0};
  auto worker = [&](std::int64_t me) {
    auto m = client->mutex("turns", {.fair = true});
    for (int i = 0; i < turns; ++i) {
      try {
        if (!m.try_lock_for(scaled(10s))) {
          ++failures;
          continue;
        }
      } catch (const Error&) {
        ++failures;
        continue;
      }
      if (!resource.write(m.token(), me)) ++failures;
      m.unlock();
    }
  };
  std::thread a(worker, 1), b(worker, 2);
  a.join();
  b.join();
  EXPECT_EQ(failures.load(), 0);
  const auto counts = resource.counts();
  EXPECT_EQ(counts.accepted, 2u * turns);
  EXPECT_EQ(counts.overlaps + counts.duplicate_tokens + counts.stale_rejected, 0u);
}

TEST_F(RedisSentinelFault, UnknownMasterNameIsRefusedNamingIt) {
  const std::string sentinels = url_.substr(0, url_.rfind('/'));
  try {
    (void)dlock::connect(sentinels + "/no-such-master", {.op_timeout = 2s});
    FAIL() << "a master name no sentinel monitors was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), errc::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find("no-such-master"), std::string::npos) << e.what();
  }
  // One sentinel listed that is not there: the others answer.
  std::string with_dead = "redis+sentinel://127.0.0.1:1," + sentinels.substr(std::string("redis+sentinel://").size()) +
                          url_.substr(url_.rfind('/'));
  auto client = dlock::connect(with_dead, {.op_timeout = 2s});
  auto m = client->mutex("x");
  EXPECT_TRUE(m.try_lock());
  m.unlock();
}

// No server needed: the URL is refused before any I/O, naming the part.
TEST(RedisSentinelUrl, BadUrlsAreRefusedNamingTheArgument) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"redis+sentinel://127.0.0.1:26379", "master name"},
      {"redis+sentinel://127.0.0.1:26379/", "master name"},
      {"redis+sentinel:///mymaster", "sentinels"},
      {"redis+sentinel://127.0.0.1:26379,127.0.0.1:26379/m", "listed twice"},
      {"redis+sentinel://127.0.0.1:26379/m?wait_replicas=101", "wait_replicas"},
      {"redis+sentinel://127.0.0.1:26379/m?wait_replicas=-1", "wait_replicas"},
      {"redis+sentinel://127.0.0.1:26379/m?wait_replicas=x", "wait_replicas"},
      {"redis+sentinel://127.0.0.1:26379/m?wait_timeout=1s", "wait_timeout"},
      {"redis+sentinel://127.0.0.1:26379/m?wait_replicas=1&wait_timeout=0ms", "wait_timeout"},
      {"redis+sentinel://127.0.0.1:26379/m?wait_replicas=1&wait_timeout=500ms", "op_timeout"},
      {"redis+sentinel://127.0.0.1:26379/m?db=x", "db"},
      {"redis+sentinel://127.0.0.1:26379/m?colour=blue", "colour"},
  };
  for (const auto& [url, named] : bad) {
    try {
      (void)dlock::connect(url, {.op_timeout = 500ms});
      ADD_FAILURE() << url << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), errc::invalid_argument) << url << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << url << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace dlock::test
