// Redis under faults: a stopped server, a restarted one, wrong credentials, a
// key of another type, many held locks and permits, connections left
// behind, and the coordination primitives (permits, latches, leaders) when
// holders die or pause and the server stops or restarts. Each
// test starts its own redis-server (scripts/redis-server.sh) in a temp dir,
// because it stops, restarts or reconfigures it.
#include "child_process.h"
#include "fenced_resource.h"
#include "ports.h"
#include "stopped_store.h"
#include "thrown.h"

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

class RedisFault : public ::testing::Test {
 protected:
  void SetUp() override { start(); }
  void TearDown() override { stop(); }

  // redis-server runs in the foreground as this process's child, so it dies
  // with the test even if the test crashes (ChildProcess sets PDEATHSIG).
  void start(std::vector<std::string> extra = {}, std::string port = "") {
    for (int attempt = 0; attempt < 20 && !server_; ++attempt) {
      port_ = port.empty() ? std::to_string(free_port()) : port;
      std::vector<std::string> args{"/usr/bin/redis-server", "--port", port_, "--bind", "127.0.0.1",
                                    "--dir", dir_.path(), "--logfile", dir_.path() + "/redis.log",
                                    "--save", "", "--appendonly", "no"};
      args.insert(args.end(), extra.begin(), extra.end());
      auto child = std::make_unique<ChildProcess>(args);
      const auto until = steady::now() + scaled(5s);
      while (steady::now() < until && !child->wait(0ms)) {
        auto reply = cli("PING");  // PONG, or NOAUTH with a password: either way it serves
        if (reply.find("PONG") != std::string::npos || reply.find("NOAUTH") != std::string::npos) {
          server_ = std::move(child);
          extra_ = extra;
          return;
        }
        std::this_thread::sleep_for(20ms);
      }
      std::this_thread::sleep_for(50ms);  // the port was taken, or the old socket lingers
    }
    FAIL() << "redis-server did not start (see " << dir_.path() << "/redis.log)";
  }
  void stop() {
    if (!server_) return;
    server_->signal(SIGCONT);
    server_->signal(SIGTERM);
    (void)server_->wait(scaled(5s));
    server_.reset();  // SIGKILLs it if it is still running
  }
  // A fresh server (empty data) on the same port.
  void restart() {
    stop();
    start(extra_, port_);
  }
  std::string base_url() const { return "redis://127.0.0.1:" + port_; }
  const std::string& port() const { return port_; }
  pid_t server_pid() const { return server_ ? server_->pid() : -1; }
  std::string cli(const std::string& args, const std::string& auth = "") const {
    return shell_output("redis-cli -h 127.0.0.1 -p " + port() + " " + auth + " " + args + " 2>/dev/null");
  }
  // Connections the server has open (CLIENT LIST lines), minus redis-cli's own.
  int connections() const {
    auto out = cli("CLIENT LIST");
    return static_cast<int>(std::count(out.begin(), out.end(), '\n')) - 1;
  }

  TempDir dir_;
  std::unique_ptr<ChildProcess> server_;
  std::string port_;
  std::vector<std::string> extra_;
};

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

TEST_F(RedisFault, WrongPasswordIsAClearErrorWithoutTheSecret) {
  stop();
  start({"--requirepass", "s3cr3t-pw"});
  const std::string host = base_url().substr(std::string("redis://").size());
  try {
    (void)dlock::connect("redis://:not-the-pw@" + host, {.op_timeout = 1s})->mutex("x").try_lock();
    FAIL() << "a wrong password was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), errc::invalid_argument) << e.what();
    EXPECT_EQ(std::string(e.what()).find("not-the-pw"), std::string::npos) << e.what();
  }
  auto client = dlock::connect("redis://:s3cr3t-pw@" + host);
  EXPECT_EQ(client->url().find("s3cr3t-pw"), std::string::npos) << client->url();
  auto m = client->mutex("x");
  EXPECT_TRUE(m.try_lock());
  m.unlock();
}

// Host names are looked up by the backend within op_timeout (hiredis's own
// lookup has no timeout). The server listens on 127.0.0.1 only, so
// "localhost" works only if its IPv4 address is the one chosen.
TEST_F(RedisFault, HostNamesAreLookedUpWithinTheCallTimeout) {
  auto client = dlock::connect("redis://localhost:" + port(), {.op_timeout = 2s});
  auto m = client->mutex("by-name");
  EXPECT_TRUE(m.try_lock());
  m.unlock();
  const auto start = steady::now();
  try {
    (void)dlock::connect("redis://no-such-host.invalid:" + port(), {.op_timeout = 500ms});
    ADD_FAILURE() << "connected to a host name that does not exist";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), errc::unavailable) << e.what();
    EXPECT_NE(std::string(e.what()).find("host name"), std::string::npos) << e.what();
  }
  EXPECT_LT(steady::now() - start, scaled(1500ms)) << "the lookup overran op_timeout (500ms)";
}

TEST_F(RedisFault, KeyOfAnotherTypeIsRefusedAndLeftAlone) {
  auto client = dlock::connect(base_url() + "/0?prefix=wt:");
  auto m = client->mutex("typed");
  ASSERT_TRUE(m.try_lock());
  auto keys = cli("--scan --pattern 'wt:*'");
  m.unlock();
  ASSERT_FALSE(keys.empty());
  const std::string key = keys.substr(0, keys.find('\n'));
  cli("DEL '" + key + "'");
  cli("SET '" + key + "' not-a-lock");
  try {
    (void)m.try_lock();
    FAIL() << "locked a key that holds a string";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), errc::invalid_argument) << e.what();
  }
  EXPECT_EQ(cli("GET '" + key + "'"), "not-a-lock\n") << "the foreign key was changed";
}

// `held` leases of 3 s (renewed every 1 s) are all renewed each period, in
// about one batch (one round trip) per period.
void expect_one_batch_per_period(Client& client, int held, const char* what) {
  // Taking them spreads their schedules over a few seconds; one period
  // (plus the half period a lease may join a batch early) merges them.
  // Measure after that.
  std::this_thread::sleep_for(1500ms);
  const auto before = client.stats();
  std::this_thread::sleep_for(3500ms);
  const auto after = client.stats();
  const auto batches = after.renewal_batches - before.renewal_batches;
  const auto renewals = after.renewals - before.renewals;
  std::printf("%d %s over 3.5 s: %llu renewal batches, %llu leases renewed\n", held, what,
              static_cast<unsigned long long>(batches), static_cast<unsigned long long>(renewals));
  // Every ~1 s: at least twice each in 3.5 s even on a loaded machine (a
  // 10,000-lease batch itself takes a while to send and answer).
  EXPECT_GE(renewals, 2u * static_cast<unsigned>(held)) << what << " were not renewed every period";
  EXPECT_LE(batches, 6u) << "renewals took more than about one round trip per period";
}

TEST_F(RedisFault, TenThousandHeldLocksRenewInOneBatchPerPeriod) {
  constexpr int locks = 10'000;
  auto client = dlock::connect(base_url());
  std::vector<Mutex> held;
  held.reserve(locks);
  for (int i = 0; i < locks; ++i) {
    held.push_back(client->mutex("many:" + std::to_string(i), {.lease = 3s}));  // renewed every 1 s
    held.back().lock();
  }
  expect_one_batch_per_period(*client, locks, "held locks");
  for (auto& m : held) EXPECT_FALSE(m.lost());
  for (auto& m : held) m.unlock();
}

TEST_F(RedisFault, NoConnectionOrThreadOutlivesTheClient) {
  // A thread first: a sanitizer's runtime starts its own helper thread
  // lazily (TSan), which must not be counted against the client.
  std::thread([] {}).join();
  const int threads_before = thread_count();
  const int before = connections();
  {
    auto client = dlock::connect(base_url());
    auto m = client->mutex("leak", {.lease = 600ms});
    std::vector<std::thread> waiters;
    m.lock();
    for (int i = 0; i < 4; ++i)
      waiters.emplace_back([&] {
        if (m.try_lock_for(2s)) m.unlock();
      });
    std::this_thread::sleep_for(300ms);
    EXPECT_GT(connections(), before);
    m.unlock();
    for (auto& t : waiters) t.join();
  }
  const auto until = steady::now() + 3s;
  while (thread_count() != threads_before && steady::now() < until) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(thread_count(), threads_before);
  while (connections() != before && steady::now() < until) std::this_thread::sleep_for(50ms);
  EXPECT_EQ(connections(), before) << "connections left open after the client was destroyed";
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

// Eight processes share a 3-permit semaphore: never more than 3 inside at
// once (the resource records the most it saw), and 3 do get in together.
TEST_F(RedisFault, EightProcessesNeverHoldMoreThanTheirPermits) {
  const std::string resource_path = dir_.path() + "/resource";
  FencedResource resource(resource_path, true);
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int i = 0; i < 8; ++i)
    workers.push_back(std::make_unique<ChildProcess>(std::vector<std::string>{
        DLOCK_TEST_WORKER, "hammer", base_url(), "crawl", "25", resource_path, "3000", "permits=3"}));
  for (auto& w : workers) EXPECT_EQ(w->wait(scaled(60s)), std::optional<int>(0));
  const auto counts = resource.counts();
  EXPECT_EQ(counts.occupied, 8u * 25u) << "not every section ran";
  EXPECT_LE(counts.max_occupancy, 3) << "more permits out than the semaphore has";
  EXPECT_EQ(counts.max_occupancy, 3) << "the permits were never all in use at once";
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

TEST_F(RedisFault, TenThousandHeldPermitsRenewInOneBatchPerPeriod) {
  constexpr int permits = 10'000;
  auto client = dlock::connect(base_url());
  auto semaphore = client->semaphore("many", permits, {.lease = 3s});  // renewed every 1 s
  for (int i = 0; i < permits; ++i) semaphore.acquire();
  expect_one_batch_per_period(*client, permits, "held permits");
  EXPECT_FALSE(semaphore.lost());
  EXPECT_EQ(semaphore.in_use(), permits);
  semaphore.release(permits);
  EXPECT_EQ(semaphore.in_use(), 0);
}

// Misuse and foreign data: clear errors, and nothing changes.
TEST_F(RedisFault, BadCountsAndForeignKeysAreRefusedAndChangeNothing) {
  auto client = dlock::connect(base_url() + "/0?prefix=bad:");
  auto three = client->semaphore("pool", 3);
  three.acquire();
  auto two = client->semaphore("pool", 2);
  try {
    (void)two.try_acquire();
    ADD_FAILURE() << "a semaphore declared with another count was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), errc::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find('2'), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find('3'), std::string::npos) << e.what();
  }
  EXPECT_EQ(three.in_use(), 1);
  three.release();
  EXPECT_EQ(thrown([&] { (void)client->semaphore("pool", 0); }), errc::invalid_argument);
  EXPECT_EQ(thrown([&] { (void)client->latch("gate", -1); }), errc::invalid_argument);
  EXPECT_EQ(thrown([&] { (void)client->barrier("meet", 0); }), errc::invalid_argument);
  // A key of another type where a counter, a latch or a semaphore would be.
  for (const std::string key : {"bad:{n}:counter", "bad:{gate}:latch", "bad:{s}:sem"}) {
    cli("SET '" + key + "' foreign");
  }
  EXPECT_EQ(thrown([&] { (void)client->counter("n").fetch_add(1); }), errc::invalid_argument);
  EXPECT_EQ(thrown([&] { (void)client->latch("gate", 1); }), errc::invalid_argument);
  EXPECT_EQ(thrown([&] { (void)client->semaphore("s", 1).try_acquire(); }), errc::invalid_argument);
  for (const std::string key : {"bad:{n}:counter", "bad:{gate}:latch", "bad:{s}:sem"})
    EXPECT_EQ(cli("GET '" + key + "'"), "foreign\n") << key << " was changed";
}

// A waiter that gives up just as a release hands it the lock (the release
// ran between its last attempt and its leaving the queue; the wake-up that
// carries the lock came after it left) gives the lock on: it is not left
// held by nobody until its lease (60 s here) ends. Each wait is a thread of
// its own (an owner that never asks again, which would take its lock back),
// and waits of 1-3 ms against max_barging_wait's 1 ms make handovers to
// waiters that are about to give up frequent.
TEST_F(RedisFault, AWaiterThatGivesUpAsTheLockIsHandedToItLeavesItFree) {
  std::vector<std::shared_ptr<Client>> clients;
  for (int i = 0; i < 2; ++i) clients.push_back(dlock::connect(base_url()));
  std::atomic<int> turns{0}, gave_up{0};
  std::vector<std::thread> workers;
  const auto until = steady::now() + 3s;
  for (int w = 0; w < 4; ++w)
    workers.emplace_back([&, w] {
      for (int i = 0; i < 5'000 && steady::now() < until; ++i)
        std::thread([&] {
          auto m = clients[static_cast<std::size_t>(w % 2)]->mutex("handed", {.lease = 60s});
          if (m.try_lock_for(std::chrono::microseconds(1000 + 500 * (i % 5)))) {
            std::this_thread::sleep_for(std::chrono::microseconds(300));
            m.unlock();
            ++turns;
          } else {
            ++gave_up;
          }
        }).join();
    });
  for (auto& t : workers) t.join();
  std::printf("%d turns, %d waits given up\n", turns.load(), gave_up.load());
  EXPECT_GT(gave_up.load(), 0) << "no wait ran out: the race was not tried";
  auto m = dlock::connect(base_url())->mutex("handed");
  EXPECT_TRUE(m.try_lock_for(scaled(1s))) << "the lock was left held by a waiter that had given up";
}

// While others may still barge past it, the head of the line is woken by
// one release only: a holder that releases and takes the lock again at once
// (its next attempt follows its release on the same connection) beats it
// nearly every time, and waking it at each release would only make it lose
// again. It asks again itself (every 5 ms, and when its bound ends the next
// release hands it the lock). Before, every one of the holder's releases
// woke it: 649 wake-ups for 663 turns of the holder.
TEST_F(RedisFault, AHeadBargedPastIsWokenOnceAndServedByItsBound) {
  auto holder_client = dlock::connect(base_url()), waiter_client = dlock::connect(base_url());
  auto holder = holder_client->mutex("barged");
  std::atomic<bool> stop{false}, held{false};
  std::atomic<int> cycles{0};
  std::thread streak([&] {
    for (int i = 0; i < 100'000 && !stop; ++i) {  // bounded: the waiter ends it within seconds
      holder.lock();
      held = true;
      std::this_thread::sleep_for(200us);
      holder.unlock();
      ++cycles;
    }
  });
  while (!held) std::this_thread::sleep_for(1ms);
  constexpr auto bound = 300ms;
  auto waiter = waiter_client->mutex("barged", {.max_barging_wait = bound});
  const auto wakeups_before = waiter_client->stats().wakeups;
  const int cycles_before = cycles.load();
  const auto start = steady::now();
  const bool got = waiter.try_lock_for(scaled(10s));
  const auto waited = steady::now() - start;
  const auto wakeups = waiter_client->stats().wakeups - wakeups_before;
  const int turns = cycles.load() - cycles_before;  // the holder's, while the waiter waited
  stop = true;
  if (got) waiter.unlock();
  streak.join();
  std::printf("waited %lld ms, woken %llu times, while the holder took it %d times\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()),
              static_cast<unsigned long long>(wakeups), turns);
  ASSERT_TRUE(got) << "the waiter never got the lock";
  EXPECT_LT(waited, bound + scaled(1s)) << "the waiter was not served by its bound";
  // (A poll of the waiter's may find the lock free between a release and the
  // holder's next attempt: then it waited less, and the holder took fewer turns.)
  EXPECT_LE(wakeups, 2u + static_cast<unsigned>(turns) / 10)
      << "the head was woken by release after release while it could only lose";
}

// The other side of waking a beaten head once: when the holder that beat
// it lets the lock go and leaves, no release wakes the head, so it must
// come back by itself soon (it asks again every 5 ms while it may still be
// barged past), not when its long bound ends or its 500 ms safety net.
TEST_F(RedisFault, ALockItsBargerLeftFreeGoesToTheBeatenHeadSoon) {
  auto holder_client = dlock::connect(base_url()), waiter_client = dlock::connect(base_url());
  auto holder = holder_client->mutex("left");
  std::atomic<bool> held{false};
  std::atomic<steady::rep> left_at{0};
  std::thread streak([&] {
    // Three long holds, each release followed at once by the next attempt
    // (the waiter woken by the first loses to it), then it leaves.
    for (int i = 0; i < 3; ++i) {
      holder.lock();
      held = true;
      std::this_thread::sleep_for(60ms);
      if (i == 2) left_at = steady::now().time_since_epoch().count();
      holder.unlock();
    }
  });
  while (!held) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(10ms);
  auto waiter = waiter_client->mutex("left", {.max_barging_wait = 20s});
  const bool got = waiter.try_lock_for(scaled(10s));
  const auto got_at = steady::now();
  if (got) waiter.unlock();
  streak.join();
  ASSERT_TRUE(got) << "the waiter never got the lock its barger left free";
  const auto after = got_at - steady::time_point(steady::duration(left_at.load()));
  std::printf("the waiter took the lock %lld ms after the barger left\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(after).count()));
  EXPECT_LT(after, scaled(150ms)) << "a free lock waited for a head that no release woke";
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

// wait_replicas on a server with no replicas: WAIT gets no acknowledgement,
// so every acquisition is released and fails with unavailable — the lock is
// left free, not held.
TEST_F(RedisFault, WaitReplicasWithoutReplicasFailsAndLeavesTheLockFree) {
  auto waiting = dlock::connect(base_url() + "?wait_replicas=1&wait_timeout=100ms", {.op_timeout = 1s});
  auto m = waiting->mutex("unreplicated");
  for (int i = 0; i < 2; ++i) {
    try {
      (void)m.try_lock_for(500ms);
      ADD_FAILURE() << "an acquisition no replica acknowledged succeeded";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), errc::unavailable) << e.what();
      EXPECT_NE(std::string(e.what()).find("0 of the 1 replicas"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(cli("HGET 'dlock:{unreplicated}:lock' owner"), "\n") << "the refused lock was left held";
  auto other = dlock::connect(base_url());
  auto taker = other->mutex("unreplicated");
  EXPECT_TRUE(taker.try_lock()) << "the refused lock was not released";
  taker.unlock();
}

}  // namespace
}  // namespace dlock::test
