// Redis under faults: a stopped server, a restarted one, and the
// coordination primitives (permits, latches, leaders) when holders pause
// and the server stops or restarts. Each test starts its own redis-server
// in a temp dir, because it stops or restarts it. (The backend's behaviour
// without faults: tests/backends/redis_test.cpp.)
#include "child_process.h"
#include "fenced_resource.h"
#include "redis_server.h"
#include "stopped_store.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// (The suite keeps its name in tests/backends/redis_test.cpp, which runs the
// same fixture: CTest's test names and the presets' filters use it.)
using RedisFault = OwnRedisServer;

TEST_F(RedisFault, StoppedServerFailsCallsWithinTheirTimeout) {
  auto client = dlock::connect(base_url(), {.op_timeout = 500ms});
  auto m = client->mutex("stopped");
  ASSERT_TRUE(m.try_lock());
  m.unlock();
  ASSERT_TRUE(stop_process(server_pid()));
  for (int i = 0; i < 2; ++i) {
    auto start = steady::now();
    try {
      (void)m.try_lock_for(10s);
      ADD_FAILURE() << "a call to a stopped server succeeded";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), errc::unavailable) << e.what();
    }
    EXPECT_LT(steady::now() - start, scaled(1500ms)) << "the call overran op_timeout (500ms)";
  }
  ::kill(server_pid(), SIGCONT);
  // The client recovers once the server answers again.
  bool recovered = false;
  for (int i = 0; i < 20 && !recovered; ++i) {
    try {
      recovered = m.try_lock_for(1s);
    } catch (const Error&) {
      std::this_thread::sleep_for(100ms);
    }
  }
  EXPECT_TRUE(recovered);
  if (recovered) m.unlock();
}

// The async API's acquisitions are bounded as calls are: waiting ones
// re-check within their safety net, and that attempt fails within
// op_timeout; none hangs while the server is stopped, and it recovers.
TEST_F(RedisFault, StoppedServerFailsPendingAsyncAcquisitionsInBoundedTime) {
  auto client = dlock::connect(base_url(), {.op_timeout = 500ms});
  auto m = client->mutex("stopped-async");
  m.lock();  // this thread holds it: every async acquisition waits
  std::vector<std::future<Hold>> waiting;
  for (int i = 0; i < 20; ++i) waiting.push_back(m.async_lock());
  std::this_thread::sleep_for(scaled(200ms));
  ASSERT_TRUE(stop_process(server_pid()));
  const auto stopped = steady::now();
  auto fresh = client->mutex("stopped-async-free").async_lock();
  for (auto* f : {&fresh, &waiting.front(), &waiting.back()}) {
    ASSERT_EQ(f->wait_until(stopped + scaled(3s)), std::future_status::ready) << "an acquisition hung";
    try {
      (void)f->get();
      ADD_FAILURE() << "an acquisition on a stopped server succeeded";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), errc::unavailable) << e.what();
    }
  }
  ::kill(server_pid(), SIGCONT);
  m.unlock();
  bool recovered = false;
  for (int i = 0; i < 20 && !recovered; ++i) {
    try {
      recovered = static_cast<bool>(m.async_try_lock_for(1s).get());
    } catch (const Error&) {
      std::this_thread::sleep_for(100ms);
    }
  }
  EXPECT_TRUE(recovered);
}

TEST_F(RedisFault, RestartedServerMakesTheHolderLoseTheLock) {
  auto client = dlock::connect(base_url(), {.op_timeout = 1s});
  auto m = client->mutex("restarted", {.lease = 1500ms});
  m.lock();
  auto stop = m.stop_token();
  restart();
  ASSERT_TRUE(server_);
  const auto until = steady::now() + scaled(5s);
  while (!(m.lost() && stop.stop_requested()) && steady::now() < until) std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(m.lost()) << "the renewal after the restart should find the lock gone";
  EXPECT_TRUE(stop.stop_requested());
  EXPECT_EQ(m.unlock_checked().code(), errc::lock_lost);
  // And the client works against the new server.
  EXPECT_TRUE(m.try_lock_for(scaled(2s)));
  m.unlock();
}

// A client closes at once while its server does not answer (SIGSTOPped):
// its subscriber, connecting again after its PING went unanswered, hangs at
// AUTH until op_timeout (5 s) and used to hold the client's destruction
// that long; it gives up when the client closes.
TEST_F(RedisFault, AClientClosesAtOnceWhileItsServerDoesNotAnswer) {
  stop();
  start({"--requirepass", "s3cr3t-pw"});
  auto client = dlock::connect("redis://:s3cr3t-pw@127.0.0.1:" + port(), {.op_timeout = 5s});
  ASSERT_TRUE(stop_process(server_pid()));
  // The subscriber's PING goes unanswered (1 s, then op_timeout): its
  // connection is lost (the client makes no other calls), and it connects
  // again at once.
  const bool lost = eventually([&] { return client->stats().disconnects >= 1; }, scaled(15s));
  std::this_thread::sleep_for(200ms);  // at AUTH by now
  const auto closing = steady::now();
  client.reset();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - closing);
  ASSERT_TRUE(lost) << "the subscriber never lost its connection to the stopped server";
  std::printf("the client closed in %lld ms (op_timeout 5 s)\n", static_cast<long long>(took.count()));
  EXPECT_LT(took, scaled(1s)) << "closing the client waited for a server that does not answer";
}

// An operator's view of a restart: the log callback hears the connection
// lost and restored and the lock lost, the counters and the metrics text
// show them, and no message carries the password or an owner id.
TEST_F(RedisFault, ARestartIsLoggedAndCountedWithoutSecrets) {
  stop();
  start({"--requirepass", "s3cr3t-pw"});
  std::mutex mu;
  std::vector<std::pair<LogLevel, std::string>> lines;
  auto client = dlock::connect("redis://:s3cr3t-pw@127.0.0.1:" + port(),
                               {.op_timeout = 1s, .log = [&](LogLevel level, std::string_view message) {
                                  std::lock_guard lk(mu);
                                  lines.emplace_back(level, std::string(message));
                                }});
  auto m = client->mutex("logged", {.lease = 1500ms});
  m.lock();
  restart();
  ASSERT_TRUE(server_);
  const auto until = steady::now() + scaled(5s);
  while (!m.lost() && steady::now() < until) std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(m.lost()) << "the renewal after the restart should find the lock gone";
  m.unlock();
  EXPECT_TRUE(m.try_lock_for(scaled(2s))) << "the client should work against the new server";
  m.unlock();

  const auto stats = client->stats();
  EXPECT_GE(stats.disconnects, 1u);
  EXPECT_GE(stats.reconnects, 1u);
  EXPECT_EQ(stats.leases_lost, 1u);
  const auto text = metrics_text(*client);
  EXPECT_NE(text.find("dlock_leases_lost_total{backend=\"redis\"} 1\n"), std::string::npos) << text;

  std::lock_guard lk(mu);
  auto logged = [&](LogLevel level, const std::string& part) {
    return std::any_of(lines.begin(), lines.end(),
                       [&](const auto& l) { return l.first == level && l.second.find(part) != std::string::npos; });
  };
  EXPECT_TRUE(logged(LogLevel::warning, "connection lost")) << "no warning about the lost connection";
  EXPECT_TRUE(logged(LogLevel::info, "connection restored")) << "no line about the restored connection";
  EXPECT_TRUE(logged(LogLevel::warning, "lock 'logged' lost")) << "no warning about the lost lock";
  for (const auto& [level, message] : lines) {
    EXPECT_EQ(message.find("s3cr3t-pw"), std::string::npos) << message;
    EXPECT_FALSE(std::regex_search(message, std::regex("[0-9a-f]{16}"))) << "an owner id in: " << message;
  }
}

// A server that stops with a permit, a leadership and a latch outstanding:
// every call fails within op_timeout, and the holders are told they lost
// once their leases have run out unrenewed. After a restart (an empty
// server) the client works again and the old holds stay lost.
TEST_F(RedisFault, StoppedServerTellsPermitAndLeaderHoldersTheyLost) {
  auto client = dlock::connect(base_url(), {.op_timeout = 500ms});
  auto semaphore = client->semaphore("sem", 2, {.lease = 1500ms});
  auto election = client->election("leader", {.lease = 1500ms});
  auto latch = client->latch("ready", 2);
  semaphore.acquire();
  election.campaign("me");
  auto permit_stop = semaphore.stop_token(), leader_stop = election.stop_token();
  ASSERT_TRUE(stop_process(server_pid()));
  const std::vector<std::pair<std::string, std::function<void()>>> calls = {
      {"semaphore.try_acquire_for", [&] { (void)semaphore.try_acquire_for(10s); }},
      {"election.leader", [&] { (void)election.leader(); }},
      {"latch.count_down", [&] { latch.count_down(); }},
      {"latch.wait_for", [&] { (void)latch.wait_for(10s); }},
      {"counter.fetch_add", [&] { (void)client->counter("n").fetch_add(1); }},
  };
  for (const auto& [what, call] : calls) {
    const auto start = steady::now();
    try {
      call();
      ADD_FAILURE() << what << " succeeded against a stopped server";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), errc::unavailable) << what << ": " << e.what();
    }
    EXPECT_LT(steady::now() - start, scaled(1500ms)) << what << " overran op_timeout (500ms)";
  }
  const auto until = steady::now() + scaled(5s);
  while (!(permit_stop.stop_requested() && leader_stop.stop_requested()) && steady::now() < until)
    std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(semaphore.lost()) << "the permit's lease ran out unrenewed, yet it is not lost";
  EXPECT_FALSE(election.is_leader()) << "the leader's lease ran out unrenewed, yet it still leads";
  EXPECT_TRUE(election.lost());
  ::kill(server_pid(), SIGCONT);
  restart();
  ASSERT_TRUE(server_);
  EXPECT_EQ(semaphore.release_checked().code(), errc::lock_lost);
  EXPECT_EQ(election.resign_checked().code(), errc::lock_lost);
  // The new server starts empty; the client works against it.
  auto again = client->semaphore("sem", 2, {.lease = 1500ms});
  EXPECT_TRUE(again.try_acquire_for(scaled(3s)));
  again.release();
  EXPECT_TRUE(election.campaign_for(scaled(3s), "me"));
  EXPECT_EQ(election.leader(), "me");
  election.resign();
}

// A leader paused past its lease stops leading: a waiting candidate takes
// over within the lease and one notification, and the paused leader's
// fenced write is refused when it wakes (it is told it lost).
TEST_F(RedisFault, ALeaderPausedPastItsLeaseIsReplacedAndFencedOff) {
  const std::string resource_path = dir_.path() + "/resource";
  FencedResource resource(resource_path, true);
  ChildProcess leader({DLOCK_TEST_WORKER, "hold", base_url(), "jobs", "1000", "watchdog", resource_path, "leader"});
  auto line = leader.read_line(scaled(10s));
  ASSERT_TRUE(line && line->starts_with("acquired ")) << line.value_or("(nothing)");
  auto client = dlock::connect(base_url());
  auto candidate = client->election("jobs", {.lease = 1s});
  ASSERT_EQ(candidate.leader(), "worker-" + std::to_string(leader.pid()));
  ASSERT_TRUE(stop_process(leader.pid()));
  const auto paused = steady::now();
  ASSERT_TRUE(candidate.campaign_for(scaled(10s), "new"));
  const auto took = steady::now() - paused;
  std::printf("new leader %lld ms after the old one paused (lease 1000 ms)\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
  EXPECT_LT(took, 1s + scaled(700ms)) << "the successor waited well past the paused leader's lease";
  EXPECT_EQ(candidate.leader(), "new");
  EXPECT_TRUE(resource.write(candidate.token(), 1));
  leader.signal(SIGCONT);
  // Wait until the woken leader has learned it lost, as its own stop_token
  // would tell it, then let it write.
  std::this_thread::sleep_for(scaled(500ms));
  leader.write_line("write");
  auto answer = leader.read_line(scaled(10s));
  ASSERT_TRUE(answer);
  EXPECT_EQ(*answer, "write rejected lost=1") << "a paused leader's stale write was accepted";
  EXPECT_EQ(resource.counts().stale_rejected, 1u);
  candidate.resign();
}

// unlock() sends the release and returns: a stopped server does not hold it
// up (unlock_checked() waits, and fails within op_timeout). The release
// runs when the server resumes, and its answer is counted then.
TEST_F(RedisFault, UnlockDoesNotWaitForTheServer) {
  auto client = dlock::connect(base_url(), {.op_timeout = 1s});
  auto m = client->mutex("async"), checked = client->mutex("checked");
  m.lock();
  checked.lock();
  expect_unlock_does_not_wait(
      m, checked, [&] { ASSERT_TRUE(stop_process(server_pid())); }, [&] { ::kill(server_pid(), SIGCONT); },
      errc::unavailable);
  expect_the_release_ran(*client, *dlock::connect(base_url()));
}
}  // namespace
}  // namespace dlock::test
