// etcd under faults: a holder killed, a member stopped (SIGSTOP) while a lock
// is held and while calls are made, a holder cut off from the cluster, and a
// 3-member cluster whose leader is killed while a lock is held. Each test
// starts its own etcd (scripts/etcd-server.sh) in a temp dir, because it
// stops or kills it. (The backend's behaviour without faults:
// tests/backends/etcd_test.cpp.)
#include "child_process.h"
#include "etcd_cluster.h"
#include "fenced_resource.h"
#include "stopped_store.h"
#include "tcp_proxy.h"
#include "thrown.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

TEST(EtcdFault, KilledHolderFreesItsLockWithinTheLeaseTtl) {
  TempDir dir;
  Etcd etcd(dir, 1);
  ASSERT_TRUE(etcd.ok());
  const std::string url = etcd.url() + "/fault?ttl=2s";
  const std::string resource = dir.path() + "/resource";
  FencedResource fenced(resource, true);
  ChildProcess holder({DLOCK_TEST_WORKER, "hold", url, "jobs", "30000", "watchdog", resource});
  auto line = holder.read_line(scaled(10s));
  ASSERT_TRUE(line && line->starts_with("acquired ")) << line.value_or("<nothing>");
  const std::uint64_t dead_token = std::stoull(line->substr(9));

  auto client = connect(url);
  auto m = client->mutex("jobs");
  ASSERT_FALSE(m.try_lock());
  holder.signal(SIGKILL);
  ASSERT_TRUE(holder.wait(5s));
  const auto start = steady::now();
  ASSERT_TRUE(m.try_lock_for(scaled(10s)));
  EXPECT_LT(steady::now() - start, 2s + scaled(1500ms)) << "not free within the lease TTL";
  EXPECT_GT(m.token(), dead_token);
  EXPECT_TRUE(fenced.write(m.token(), 1));
  m.unlock();
}

// A cluster with authentication on: a user with a role on dlock's prefix
// locks; a wrong password, a prefix the role does not cover and no
// credentials at all are refused with errors that never show the password;
// and the auth token, which etcd expires (here after 2 s), is fetched again
// without the caller noticing.
TEST(EtcdFault, StoppedServerFailsCallsWithinTheirTimeout) {
  TempDir dir;
  Etcd etcd(dir, 1);
  ASSERT_TRUE(etcd.ok());
  auto client = connect(etcd.url() + "/fault?ttl=5s", {.op_timeout = 500ms});
  auto m = client->mutex("jobs");
  ASSERT_TRUE(etcd.act("pause"));
  const auto start = steady::now();
  EXPECT_EQ(thrown([&] { (void)m.try_lock(); }), errc::unavailable);
  EXPECT_LT(steady::now() - start, scaled(1500ms)) << "a call outlived op_timeout";
  const auto again = steady::now();
  EXPECT_EQ(thrown([&] { (void)m.try_lock_for(1s); }), errc::unavailable);
  EXPECT_LT(steady::now() - again, scaled(2500ms));
  ASSERT_TRUE(etcd.act("resume"));
  EXPECT_TRUE(m.try_lock_for(scaled(5s))) << "no recovery after the server came back";
  m.unlock();
}

// unlock() sends the delete and returns: a stopped member does not hold it
// up (unlock_checked() waits, and fails within op_timeout). The delete is
// sent again once the member answers, so the lock is free long before the
// client's lease (30 s) would free it, and the thread's next call runs
// behind it and finds both releases accounted for.
TEST(EtcdFault, UnlockDoesNotWaitForTheServer) {
  TempDir dir;
  Etcd etcd(dir, 1);
  ASSERT_TRUE(etcd.ok());
  const std::string url = etcd.url() + "/fault?ttl=30s";
  auto client = connect(url, {.op_timeout = 1s});
  auto m = client->mutex("async"), checked = client->mutex("checked");
  m.lock();
  checked.lock();
  expect_unlock_does_not_wait(
      m, checked, [&] { ASSERT_TRUE(etcd.act("pause")); }, [&] { ASSERT_TRUE(etcd.act("resume")); }, errc::unavailable);
  expect_the_release_ran(*client, *connect(url));
}

// A client closed while a release it sent is unanswered (the member
// stopped) closes within its timeouts, not at the release's give-up (the
// lease's TTL), and nothing of it runs afterwards (ASan, TSan: the release's
// answer would come to state that is gone). Neither the release nor the
// lease's revocation can reach the member, so the lock goes with the lease.
TEST(EtcdFault, AClientClosedWithAReleaseUnansweredClosesInTime) {
  TempDir dir;
  Etcd etcd(dir, 1);
  ASSERT_TRUE(etcd.ok());
  auto client = connect(etcd.url() + "/fault?ttl=3s", {.op_timeout = 500ms});
  {
    auto m = client->mutex("async");
    m.lock();
    ASSERT_TRUE(etcd.act("pause"));
    m.unlock();
  }
  const auto start = steady::now();
  client.reset();  // waits for the answer (op_timeout), then for the lease's revocation (op_timeout)
  const auto took = steady::now() - start;
  ASSERT_TRUE(etcd.act("resume"));
  EXPECT_LT(took, scaled(2500ms)) << "closing waited for the release's give-up";
  auto other = connect(etcd.url() + "/fault");
  auto taker = other->mutex("async");
  EXPECT_TRUE(taker.try_lock_for(scaled(8s))) << "the lease did not free the lock";
  taker.unlock();
}

// A lone member killed for 2 s is one lost connection in the client's stats,
// not one per try to open its keepalive stream again (which go on, backing
// off); the client works again as soon as the member is back, and a lock
// held across the outage is still held (its lease survives on the server
// and the client renews it in time). Its renewal used to wait for gRPC's
// backup poller (every 5 s) to notice the new connection, 5-11 s after the
// restart, by when the lease's local deadline had passed.
TEST(EtcdFault, ADownClusterIsOneDisconnectAndTheClientRecoversWithItsLocks) {
  TempDir dir;
  Etcd etcd(dir, 1);
  ASSERT_TRUE(etcd.ok());
  // op_timeout: room for a fresh member's first lease grant on a loaded
  // machine; the lease: 6 s, scaled (whole seconds), room for the restart
  // (start-node takes 1.5 s here, gRPC's reconnection backoff up to 1.2 s).
  const auto ttl = std::chrono::duration_cast<std::chrono::seconds>(scaled(6s));
  auto client = connect(etcd.url() + "/fault?ttl=" + std::to_string(ttl.count()) + "s", {.op_timeout = 2s});
  auto held = client->mutex("held");
  held.lock();
  auto m = client->mutex("jobs");
  ASSERT_EQ(client->stats().disconnects, 0u);
  ASSERT_TRUE(etcd.act("kill"));
  std::this_thread::sleep_for(2s);  // every stream opened meanwhile ends at once, unanswered
  EXPECT_EQ(client->stats().disconnects, 1u) << "each try to reopen the stream counted as a disconnect";
  ASSERT_TRUE(etcd.act("start-node"));
  const auto restarted = steady::now();
  bool got = false;
  for (const auto until = restarted + scaled(4s); !got && steady::now() < until;) {
    try {
      got = m.try_lock();
    } catch (const Error& e) {
      ASSERT_EQ(e.kind(), errc::unavailable) << e.what();
      std::this_thread::sleep_for(100ms);
    }
  }
  EXPECT_TRUE(got) << "the client did not reconnect within 4 s of the member's restart";
  if (got) m.unlock();
  // Past the hold's local deadline had it not been renewed since the kill
  // (at most ttl after it, and the restart came 2 s after it or later).
  std::this_thread::sleep_until(restarted + ttl - 1s);
  EXPECT_FALSE(held.lost()) << "a 2 s outage lost a lock held with ttl=" << ttl.count() << "s";
  EXPECT_TRUE(held.unlock_checked().ok());
}

// The holder's lease cannot be kept alive while the server is stopped: it is
// told `lost` by the lease's local deadline, before the server (resumed)
// lets another client in, and its fenced write is refused.
TEST(EtcdFault, HolderIsToldLostBeforeAnotherAcquiresAfterAPause) {
  TempDir dir;
  Etcd etcd(dir, 1);
  ASSERT_TRUE(etcd.ok());
  const std::string url = etcd.url() + "/fault?ttl=2s";
  FencedResource fenced(dir.path() + "/resource", true);
  auto holder_client = connect(url, {.op_timeout = 500ms});
  auto held = holder_client->mutex("jobs");
  held.lock();
  const auto token = held.token();
  ASSERT_TRUE(fenced.write(token, 1));

  ASSERT_TRUE(etcd.act("pause"));
  const auto paused = steady::now();
  ASSERT_TRUE(eventually([&] { return held.lost(); }, 4s)) << "the holder was never told it lost the lock";
  const auto lost_after = steady::now() - paused;
  std::this_thread::sleep_for(2s);  // past the TTL as the server counts it
  ASSERT_TRUE(etcd.act("resume"));

  auto other_client = connect(url);
  auto other = other_client->mutex("jobs");
  const auto asked = steady::now();
  ASSERT_TRUE(other.try_lock_for(scaled(10s)));
  EXPECT_LT(lost_after, asked - paused) << "another client acquired before the holder was told";
  EXPECT_GT(other.token(), token);
  EXPECT_TRUE(fenced.write(other.token(), 2));
  EXPECT_FALSE(fenced.write(token, 3)) << "the lost holder's fenced write was accepted";
  EXPECT_EQ(held.unlock_checked().code(), errc::lock_lost);
  other.unlock();
}

// A holder cut off from the cluster by a proxy that black-holes every byte
// (nothing is closed: a partition) past its lease TTL, while another client
// waits for the lock: the holder is told `lost` by its lease's local
// deadline before the other client gets the lock (when the cluster expires
// the lease), and its fenced write is refused.
TEST(EtcdFault, PartitionedHolderIsToldLostBeforeAnotherAcquires) {
  TempDir dir;
  Etcd etcd(dir, 1);
  ASSERT_TRUE(etcd.ok());
  TcpProxy proxy(etcd.client_port());
  const std::string path = "/fault?ttl=2s";
  FencedResource fenced(dir.path() + "/resource", true);
  auto holder_client = connect("etcd://127.0.0.1:" + std::to_string(proxy.port()) + path, {.op_timeout = 500ms});
  auto held = holder_client->mutex("jobs");
  held.lock();
  const auto token = held.token();
  ASSERT_TRUE(fenced.write(token, 1));

  auto other_client = connect(etcd.url() + path, {.op_timeout = 500ms});
  auto other = other_client->mutex("jobs");
  ASSERT_FALSE(other.try_lock());
  proxy.black_hole(true);
  const auto cut = steady::now();
  std::atomic<bool> acquired{false};
  steady::time_point acquired_at{};
  std::uint64_t other_token = 0;
  bool other_wrote = false;
  std::thread contender([&] {
    if (!other.try_lock_for(scaled(10s))) return;
    acquired_at = steady::now();
    acquired = true;
    other_token = other.token();
    other_wrote = fenced.write(other_token, 2);
    other.unlock();
  });
  // lost() is the calling thread's hold: the holder's thread asks.
  while (!held.lost() && !acquired && steady::now() < cut + scaled(10s)) std::this_thread::sleep_for(1ms);
  const auto lost_at = steady::now();
  const bool told = held.lost();
  contender.join();
  proxy.black_hole(false);

  ASSERT_TRUE(told) << "the cut-off holder was never told it lost the lock";
  ASSERT_TRUE(acquired) << "the other client never got the lock";
  const auto ms = [&](steady::time_point t) { return std::chrono::duration_cast<std::chrono::milliseconds>(t - cut).count(); };
  std::printf("cut off at 0 ms: holder told lost at %lld ms, the other client acquired at %lld ms\n",
              static_cast<long long>(ms(lost_at)), static_cast<long long>(ms(acquired_at)));
  RecordProperty("holder_told_lost_ms", std::to_string(ms(lost_at)));
  RecordProperty("other_acquired_ms", std::to_string(ms(acquired_at)));
  EXPECT_LT(lost_at, acquired_at) << "another client acquired before the holder was told";
  EXPECT_GT(other_token, token);
  EXPECT_TRUE(other_wrote);
  EXPECT_FALSE(fenced.write(token, 3)) << "the lost holder's fenced write was accepted";
  EXPECT_EQ(held.unlock_checked().code(), errc::lock_lost);
}

// The thread stacks this process has mapped: glibc puts a guard page of
// its own (one page, no access) below each. A thread that ended but was
// never joined keeps its stack, so each one left unjoined is one more; a
// joined thread's stack is kept for the next thread to reuse.
int thread_stacks() {
  std::ifstream maps("/proc/self/maps");
  const unsigned long page = static_cast<unsigned long>(::sysconf(_SC_PAGESIZE));
  int n = 0;
  for (std::string line; std::getline(maps, line);) {
    unsigned long start = 0, end = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &start, &end, perms) == 3 && std::string(perms) == "---p" &&
        end - start == page)
      ++n;
  }
  return n;
}

// A waiter's watch stream broken again and again (a proxy cuts every
// connection): each break makes the waiter watch again on a new stream,
// read by a new thread. The threads of the streams that ended are joined
// as new ones start, not kept until the client closes, so what the process
// maps stays bounded however often the stream breaks; and the waiter still
// gets the lock.
TEST(EtcdFault, BrokenWatchStreamsLeaveNoThreadsBehind) {
  TempDir dir;
  Etcd etcd(dir, 1);
  ASSERT_TRUE(etcd.ok());
  TcpProxy proxy(etcd.client_port());
  const std::string path = "/fault?ttl=5s";
  auto holder_client = connect(etcd.url() + path);
  auto held = holder_client->mutex("jobs");
  held.lock();
  auto waiter_client = connect("etcd://127.0.0.1:" + std::to_string(proxy.port()) + path, {.op_timeout = 2s});
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    auto m = waiter_client->mutex("jobs");
    if (!m.try_lock_for(scaled(120s))) return;
    got = true;
    m.unlock();
  });
  std::this_thread::sleep_for(scaled(1s));  // it waits, watching the holder's key
  const int before = thread_stacks();
  constexpr int breaks = 20;
  for (int i = 0; i < breaks; ++i) {
    proxy.cut();
    std::this_thread::sleep_for(scaled(700ms));  // it reconnects and watches again
  }
  const int after = thread_stacks();
  std::printf("thread stacks mapped: %d before %d breaks of the watch stream, %d after\n", before, breaks, after);
  EXPECT_LT(after - before, breaks / 4) << "the readers of broken watch streams were left unjoined";
  held.unlock();
  waiter.join();
  EXPECT_TRUE(got) << "the waiter never got the lock after its watch streams broke";
}

// A 3-member cluster: the leader is killed while a lock is held. The lease
// survives (the new leader keeps it), the holder keeps its lock and token,
// nobody else gets it meanwhile, and the lock works after re-election.
TEST(EtcdFault, LeaderKilledWhileHeldKeepsTheLock) {
  TempDir dir;
  Etcd etcd(dir, 3);
  ASSERT_TRUE(etcd.ok());
  const std::string url = etcd.url() + "/fault?ttl=5s";
  // What the holder's client says (a lost lock says why), timed from the kill.
  std::mutex log_mu;
  std::vector<std::string> log;
  std::atomic<steady::rep> killed_at{steady::now().time_since_epoch().count()};
  const auto record = [&](LogLevel, std::string_view message) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        steady::now() - steady::time_point(steady::duration(killed_at.load())))
                        .count();
    std::lock_guard lk(log_mu);
    log.push_back(std::to_string(ms) + " ms: " + std::string(message));
  };
  const auto said = [&] {
    std::lock_guard lk(log_mu);
    std::string out;
    for (const auto& line : log) out += "\n  " + line;
    return out;
  };
  auto holder_client = connect(url, {.op_timeout = 2s, .log = record});
  auto held = holder_client->mutex("jobs");
  held.lock();
  const auto token = held.token();

  const int leader = etcd.leader();
  ASSERT_GT(leader, 0);
  killed_at = steady::now().time_since_epoch().count();
  ASSERT_TRUE(etcd.act("kill", leader));
  // A client of its own, once the cluster has a leader again.
  std::shared_ptr<Client> other_client;
  const auto elected_by = steady::now() + scaled(15s);
  while (!other_client && steady::now() < elected_by) {
    try {
      other_client = connect(url, {.op_timeout = 2s});
    } catch (const Error& e) {
      ASSERT_EQ(e.kind(), errc::unavailable) << e.what();
    }
  }
  ASSERT_TRUE(other_client) << "no leader again within 15 s";
  auto other = other_client->mutex("jobs");
  const auto until = steady::now() + 8s;  // past the TTL: the lease must have been kept
  bool told_why = false;
  while (steady::now() < until) {
    bool got = false;
    try {
      got = other.try_lock();
    } catch (const Error&) {
      // unavailable during the election: fine
    }
    EXPECT_FALSE(got) << "a second holder while the first holds";
    if (got) other.unlock();
    const bool lost = held.lost();
    EXPECT_FALSE(lost) << "the holder lost its lock to a leader change"
                       << (told_why ? std::string() : " (its client said, from the kill:" + said() + ")");
    told_why = told_why || lost;
    std::this_thread::sleep_for(250ms);
  }
  EXPECT_EQ(held.token(), token);
  EXPECT_TRUE(held.unlock_checked().ok());
  ASSERT_TRUE(other.try_lock_for(scaled(5s)));
  EXPECT_GT(other.token(), token);
  other.unlock();
}

}  // namespace
}  // namespace dlock::test
