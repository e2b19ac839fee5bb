// ZooKeeper under faults: a holder cut off from the ensemble, a dropped
// connection under each lost_on policy, killed holders and waiters (no
// nodes left behind), a leader killed in a 3-node ensemble, a stopped
// server, an election's leader cut off or its node deleted, and a barrier
// member on a stopped server or whose session expires while it waits. Each
// test runs its own servers (java children that die with the test) because
// it kills, pauses or relays them. (The backend's behaviour without faults:
// tests/backends/zookeeper_test.cpp.)
#include "child_process.h"
#include "fenced_resource.h"
#include "servers.h"
#include "stopped_store.h"
#include "tcp_proxy.h"
#include "zookeeper_ensemble.h"
#include "zookeeper_nodes.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>
#include <signal.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <regex>
#include <thread>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// (tests/backends/zookeeper_test.cpp runs the same fixture, but for via(), as
// suite ZooKeeperFault too: CTest's test names use it.)
class ZooKeeperFault : public ZooKeeperRootTest {
 protected:
  // A URL through `proxy` (whose faults the client then sees) with `query`.
  std::string via(const TcpProxy& proxy, const std::string& query) const {
    return "zk://127.0.0.1:" + std::to_string(proxy.port()) + root() + "?" + query;
  }
};

TEST_F(ZooKeeperFault, CutOffHolderLearnsItLostBeforeAnotherTakesIt) {
  ZooKeeperEnsemble zk(dir_.path(), 1);
  TcpProxy proxy(zk.client_port(0));
  FencedResource resource(dir_.path() + "/resource", true);
  auto holder = connect(via(proxy, "session_timeout=2s"));
  auto m = holder->mutex("cut");
  m.lock();
  const auto stale = m.token();
  ASSERT_TRUE(resource.write(stale, 1));
  std::atomic<steady::rep> lost_at{0};
  std::stop_callback on_lost(m.stop_token(), [&] { lost_at = steady::now().time_since_epoch().count(); });

  proxy.black_hole(true);  // a partition: nothing passes, nothing is closed
  auto other = connect(zk.url() + root() + "?session_timeout=2s");
  auto m2 = other->mutex("cut");
  ASSERT_TRUE(m2.try_lock_for(scaled(15s))) << "the cut-off holder's session never expired";
  const auto taken_at = steady::now().time_since_epoch().count();
  ASSERT_NE(lost_at.load(), 0) << "another client took the lock before the holder learnt it had lost it";
  EXPECT_LT(lost_at.load(), taken_at);
  EXPECT_TRUE(m.lost());
  EXPECT_GT(m2.token(), stale);
  EXPECT_TRUE(resource.write(m2.token(), 2));
  EXPECT_FALSE(resource.write(stale, 1)) << "the cut-off holder's stale write was accepted";

  proxy.black_hole(false);
  EXPECT_EQ(m.unlock_checked().code(), errc::lock_lost);
  // Calls made while the expired session is being replaced may fail with
  // unavailable (retry): wait until the client has its new session.
  ASSERT_TRUE(eventually([&] { return holder->ping().ok(); }, 15s)) << "no new session after the partition healed";
  EXPECT_FALSE(holder->mutex("cut").try_lock()) << "the old holder's unlock freed the new holder's lock";
  const auto second = m2.token();
  m2.unlock();
  // The cut-off client goes on with a new session.
  auto again = holder->mutex("cut");
  ASSERT_TRUE(again.try_lock_for(scaled(15s)));
  EXPECT_GT(again.token(), second);
  again.unlock();
}

TEST_F(ZooKeeperFault, DroppedConnectionLosesTheLockAndFreesItUnderTheSafePolicy) {
  ZooKeeperEnsemble zk(dir_.path(), 1);
  TcpProxy proxy(zk.client_port(0));
  // A long session: if the lock is free soon, it is because the holder
  // deleted its node, not because the session expired.
  auto holder = connect(via(proxy, "session_timeout=10s"));
  auto m = holder->mutex("drop");
  m.lock();
  proxy.cut();  // the client reconnects at once, same session
  EXPECT_TRUE(eventually([&] { return m.lost(); }, 3s)) << "a suspended session must count as lost (lost_on=suspend)";
  auto other = connect(zk.url() + root());
  auto m2 = other->mutex("drop");
  const auto start = steady::now();
  ASSERT_TRUE(m2.try_lock_for(scaled(8s)));
  EXPECT_LT(steady::now() - start, scaled(5s)) << "the dropped hold's node was left until the session expired";
  EXPECT_EQ(m.unlock_checked().code(), errc::lock_lost);
  m2.unlock();
}

// The operator's view of a dropped connection: the log callback hears the
// session suspended and restored and the lock lost, the counters show them,
// and no message carries the password or an owner id.
TEST_F(ZooKeeperFault, DroppedConnectionIsLoggedAndCountedWithoutSecrets) {
  ZooKeeperEnsemble zk(dir_.path(), 1);
  TcpProxy proxy(zk.client_port(0));
  std::mutex mu;
  std::vector<std::pair<LogLevel, std::string>> lines;
  auto holder = connect("zk://alice:s3cr3t-pw@127.0.0.1:" + std::to_string(proxy.port()) + root() +
                            "?session_timeout=10s",
                        {.log = [&](LogLevel level, std::string_view message) {
                           std::lock_guard lk(mu);
                           lines.emplace_back(level, std::string(message));
                         }});
  auto m = holder->mutex("logged");
  m.lock();
  proxy.cut();  // the client reconnects at once, same session
  ASSERT_TRUE(eventually([&] { return m.lost(); }, 3s));
  ASSERT_TRUE(eventually([&] { return holder->stats().reconnects >= 1; }, 10s)) << "no reconnect counted";
  EXPECT_GE(holder->stats().disconnects, 1u);
  EXPECT_EQ(holder->stats().leases_lost, 1u);
  EXPECT_EQ(m.unlock_checked().code(), errc::lock_lost);

  std::lock_guard lk(mu);
  auto logged = [&](LogLevel level, const std::string& part) {
    return std::any_of(lines.begin(), lines.end(),
                       [&](const auto& l) { return l.first == level && l.second.find(part) != std::string::npos; });
  };
  EXPECT_TRUE(logged(LogLevel::warning, "connection lost")) << "no warning about the suspended session";
  EXPECT_TRUE(logged(LogLevel::info, "connection restored")) << "no line about the restored connection";
  EXPECT_TRUE(logged(LogLevel::warning, "lock 'logged' lost")) << "no warning about the lost lock";
  for (const auto& [level, message] : lines) {
    EXPECT_EQ(message.find("s3cr3t-pw"), std::string::npos) << message;
    EXPECT_FALSE(std::regex_search(message, std::regex("[0-9a-f]{16}"))) << "an owner id in: " << message;
  }
}

// A semaphore permit dies with its session like a lock: the cut-off holder
// learns it lost the permit (lost(), stop_token) before another client gets
// it, and its release reports lock_lost.
TEST_F(ZooKeeperFault, CutOffPermitHolderLearnsItLostBeforeAnotherTakesIt) {
  ZooKeeperEnsemble zk(dir_.path(), 1);
  TcpProxy proxy(zk.client_port(0));
  auto holder = connect(via(proxy, "session_timeout=2s"));
  auto permit = holder->semaphore("permits", 1);
  permit.acquire();
  std::atomic<steady::rep> lost_at{0};
  std::stop_callback on_lost(permit.stop_token(), [&] { lost_at = steady::now().time_since_epoch().count(); });
  EXPECT_FALSE(permit.lost());

  proxy.black_hole(true);
  auto other = connect(zk.url() + root() + "?session_timeout=2s");
  auto taker = other->semaphore("permits", 1);
  ASSERT_TRUE(taker.try_acquire_for(scaled(15s))) << "the cut-off holder's permit never came back";
  const auto taken_at = steady::now().time_since_epoch().count();
  ASSERT_NE(lost_at.load(), 0) << "another client got the permit before the holder learnt it had lost it";
  EXPECT_LT(lost_at.load(), taken_at);
  EXPECT_TRUE(permit.lost());
  EXPECT_GT(taker.token(), permit.token());

  proxy.black_hole(false);
  EXPECT_EQ(permit.release_checked().code(), errc::lock_lost);
  EXPECT_EQ(permit.held(), 0);
  EXPECT_FALSE(permit.lost()) << "a handle with no permits left still reports a loss";
  EXPECT_EQ(taker.in_use(), 1) << "the old holder's release freed the new holder's permit";
  taker.release();
}

// A taker cut off while it waits for a permit is told within op_timeout
// (unavailable, never a hang), leaves no lease behind once its session is
// gone, and takes a permit normally once the network is back.
TEST_F(ZooKeeperFault, CutOffPermitWaiterFailsWithinItsTimeoutAndLeavesNothing) {
  ZooKeeperEnsemble zk(dir_.path(), 1);
  TcpProxy proxy(zk.client_port(0));
  auto holder_client = connect(zk.url() + root() + "?session_timeout=2s");
  auto holder = holder_client->semaphore("permits", 1);
  holder.acquire();
  auto waiter_client = connect(via(proxy, "session_timeout=2s"), {.op_timeout = 2s});
  auto waiting = std::async(std::launch::async, [&]() -> errc {
    try {
      return waiter_client->semaphore("permits", 1).try_acquire_for(scaled(60s)) ? errc{} : errc::timeout;
    } catch (const Error& e) {
      return e.kind();
    }
  });
  ASSERT_TRUE(eventually([&] { return holder.in_use() == 2; }, 10s)) << "the waiter never queued";
  proxy.black_hole(true);
  ASSERT_EQ(waiting.wait_for(scaled(10s)), std::future_status::ready) << "a cut-off waiter hung";
  EXPECT_EQ(waiting.get(), errc::unavailable);
  EXPECT_TRUE(eventually([&] { return holder.in_use() == 1; }, 15s)) << "the cut-off waiter's lease stayed";
  proxy.black_hole(false);
  auto again = waiter_client->semaphore("permits", 1);
  ASSERT_TRUE(eventually([&] { return waiter_client->ping().ok(); }, 15s)) << "no new session after the cut healed";
  EXPECT_FALSE(again.try_acquire());
  holder.release();
  EXPECT_TRUE(again.try_acquire_for(scaled(10s)));
}

// A waiting taker whose lease node is deleted under it (an operator, or a
// session that expired while the connection held) queues again, and still
// gets the permit when it comes back.
TEST_F(ZooKeeperFault, PermitWaiterWhoseLeaseNodeVanishesQueuesAgain) {
  ZooKeeperEnsemble zk(dir_.path(), 1);
  auto holder_client = connect(zk.url() + root());
  auto holder = holder_client->semaphore("permits", 1);
  holder.acquire();
  const auto before = children_of(hosts(zk), root() + "/permits/leases");
  ASSERT_TRUE(before && before->size() == 1u);
  auto waiter_client = connect(zk.url() + root());
  auto waiting = std::async(std::launch::async, [&] {
    auto waiter = waiter_client->semaphore("permits", 1);
    const bool got = waiter.try_acquire_for(scaled(30s));
    if (got) waiter.release();
    return got;
  });
  ASSERT_TRUE(eventually([&] { return holder.in_use() == 2; }, 10s)) << "the waiter never queued";
  auto queued = children_of(hosts(zk), root() + "/permits/leases");
  ASSERT_TRUE(queued && queued->size() == 2u);
  const std::string waiting_node = queued->front() == before->front() ? queued->back() : queued->front();
  zhandle_t* zh = zookeeper_init(hosts(zk).c_str(), nullptr, 5000, nullptr, nullptr, 0);
  ASSERT_TRUE(zh);
  ASSERT_TRUE(eventually([&] { return zoo_state(zh) == ZOO_CONNECTED_STATE; }, 10s));
  EXPECT_EQ(zoo_delete(zh, (root() + "/permits/leases/" + waiting_node).c_str(), -1), ZOK);
  zookeeper_close(zh);
  // A new node of the waiter's: the old one is not back, the count is.
  ASSERT_TRUE(eventually(
      [&] {
        auto now = children_of(hosts(zk), root() + "/permits/leases");
        return now && now->size() == 2u && std::find(now->begin(), now->end(), waiting_node) == now->end();
      },
      10s))
      << "the waiter did not queue again";
  EXPECT_EQ(waiting.wait_for(300ms), std::future_status::timeout) << "the waiter got a permit that was held";
  holder.release();
  EXPECT_TRUE(waiting.get()) << "the waiter gave up instead of queueing again";
}

TEST_F(ZooKeeperFault, DroppedConnectionKeepsTheLockUnderTheExpiryPolicy) {
  ZooKeeperEnsemble zk(dir_.path(), 1);
  TcpProxy proxy(zk.client_port(0));
  auto holder = connect(via(proxy, "session_timeout=4s&lost_on=expiry"));
  auto m = holder->mutex("drop", {.lease = 1s});
  m.lock();
  const auto renewals = holder->stats().renewals;
  proxy.cut();
  std::this_thread::sleep_for(1500ms);
  EXPECT_FALSE(m.lost()) << "the session survived the dropped connection; the lock should have too";
  auto other = connect(zk.url() + root());
  EXPECT_FALSE(other->mutex("drop").try_lock());
  EXPECT_GT(holder->stats().renewals, renewals) << "renewals stopped after the reconnect";
  EXPECT_TRUE(m.unlock_checked().ok());
  EXPECT_TRUE(other->mutex("drop").try_lock_for(scaled(3s)));
}

TEST_F(ZooKeeperFault, KilledHoldersAndWaitersLeaveNoNodes) {
  ZooKeeperEnsemble zk(dir_.path(), 1);
  FencedResource resource(dir_.path() + "/resource", true);
  const std::string url = zk.url() + root() + "?session_timeout=2s";
  auto start_worker = [&] {
    return std::make_unique<ChildProcess>(
        std::vector<std::string>{DLOCK_TEST_WORKER, "hold", url, "killed", "30000", "watchdog", dir_.path() + "/resource"});
  };
  auto holder = start_worker();
  auto line = holder->read_line(scaled(10s));
  ASSERT_TRUE(line && line->starts_with("acquired ")) << line.value_or("<nothing>");
  auto waiter = start_worker();  // queues behind the holder
  auto dies_waiting = start_worker();
  ASSERT_TRUE(eventually([&] { return count_children(hosts(zk), root() + "/killed") == 3; }, 10s));

  dies_waiting->signal(SIGKILL);  // a waiter that dies: its node goes with its session
  holder->signal(SIGKILL);
  auto next = waiter->read_line(scaled(10s));
  ASSERT_TRUE(next && next->starts_with("acquired ")) << "the waiter never got the dead holder's lock";
  waiter->signal(SIGKILL);

  auto c = connect(url);
  auto m = c->mutex("killed");
  ASSERT_TRUE(m.try_lock_for(scaled(10s)));
  m.unlock();
  c.reset();
  EXPECT_TRUE(eventually([&] { return count_children(hosts(zk), root() + "/killed") == 0; }, 5s))
      << "nodes of dead clients were left behind";
}

// Where both stopped-waiter tests start: a one-member ensemble with 2 s
// sessions, `name` held by a client of this process, and a worker that
// waits for it once started.
struct HeldWithShortSessions {
  HeldWithShortSessions(const std::string& dir, const std::string& root, const std::string& name)
      : zk(dir, 1),
        resource(dir + "/resource", true),  // the worker's (unused here)
        url(zk.url() + root + "?session_timeout=2s"),
        holding(connect(url)),
        holder(holding->mutex(name)),
        worker_args{DLOCK_TEST_WORKER, "hold", url, name, "30000", "watchdog", dir + "/resource"} {
    holder.lock();
  }
  ChildProcess waiter() const { return ChildProcess(worker_args); }

  ZooKeeperEnsemble zk;
  FencedResource resource;
  std::string url;
  std::shared_ptr<Client> holding;
  Mutex holder;
  std::vector<std::string> worker_args;
};

// Another client takes `name` while `waiter` (stopped past its session)
// is still stopped; resumed, the waiter must not report the lock while the
// other holds it: its lock() fails, or it gets the lock afterwards with a
// greater token.
void resumed_waiter_waits_its_turn(const std::string& url, const std::string& name, ChildProcess& waiter) {
  auto taking = connect(url);
  auto other = taking->mutex(name);
  ASSERT_TRUE(other.try_lock_for(scaled(5s)));
  waiter.signal(SIGCONT);
  auto early = waiter.read_line(scaled(3s));
  EXPECT_FALSE(early && early->starts_with("acquired ")) << "the resumed waiter took the lock another client holds";
  const auto taken = other.token();
  other.unlock();
  if (auto line = early ? early : waiter.read_line(scaled(10s))) {
    ASSERT_TRUE(line->starts_with("acquired ")) << *line;
    EXPECT_GT(std::stoull(line->substr(9)), taken);
  } else {
    EXPECT_NE(waiter.wait(scaled(5s)).value_or(0), 0) << "the waiter neither got the lock nor failed";
  }
}

// A waiter stopped (SIGSTOP) while the lock is handed to it, past its
// session: the release's event waits in its socket, the server ends its
// session (its node goes) and another client takes the lock. Resumed, the
// waiter reads the event first; it must not take that for the lock. Its
// lock() then fails (the connection went with the session), or it queues
// again and gets the lock after the other, with a greater token.
TEST_F(ZooKeeperFault, WaiterStoppedPastItsSessionAsTheLockIsHandedToItIsNotGrantedIt) {
  HeldWithShortSessions held(dir_.path(), root(), "handed");
  auto waiter = held.waiter();
  ASSERT_TRUE(eventually([&] { return count_children(hosts(held.zk), root() + "/handed") == 2; }, 10s))
      << "the waiter never queued";
  ASSERT_TRUE(stop_process(waiter.pid()));
  held.holder.unlock();  // the waiter's watch fires into its stopped process
  ASSERT_TRUE(eventually([&] { return count_children(hosts(held.zk), root() + "/handed") == 0; }, 15s))
      << "the stopped waiter's session never expired";
  resumed_waiter_waits_its_turn(held.url, "handed", waiter);
}

// The same two places back: the waiter watches the holder's node and, once
// it goes, the one between (then_watch). Both go while it is stopped, and
// its session with them; resumed, the client opens a new session, and an
// answer on that one ("the node between is gone") said nothing about the
// waiter's own node, gone with the old session. Seen once in CI's nemesis
// (zookeeper_process, seed 3457777187: the fence refused the resumed
// waiter's write under token 19 while another held token 41).
TEST_F(ZooKeeperFault, WaiterStoppedTwoPlacesBackIsNotGrantedOnANewSessionsAnswer) {
  HeldWithShortSessions held(dir_.path(), root(), "handed2");
  auto middle_client = connect(held.url);
  std::thread middle([&] {
    auto m = middle_client->mutex("handed2");
    if (m.try_lock_for(scaled(20s))) {
      std::this_thread::sleep_for(100ms);
      m.unlock();
    }
  });
  ASSERT_TRUE(eventually([&] { return count_children(hosts(held.zk), root() + "/handed2") == 2; }, 10s));
  auto waiter = held.waiter();
  ASSERT_TRUE(eventually([&] { return count_children(hosts(held.zk), root() + "/handed2") == 3; }, 10s))
      << "the waiter never queued";
  ASSERT_TRUE(stop_process(waiter.pid()));
  held.holder.unlock();  // the middle one takes it, then lets it go
  middle.join();
  ASSERT_TRUE(eventually([&] { return count_children(hosts(held.zk), root() + "/handed2") == 0; }, 15s))
      << "the stopped waiter's session never expired";
  resumed_waiter_waits_its_turn(held.url, "handed2", waiter);
}

// Contenders that leave from the middle of the queue free nothing for the
// one behind them. Here they are another client's nodes (as a Curator or
// kazoo waiter makes), A then B, between a dlock holder and a dlock waiter
// that watches A, the node two places before its own. They go
//   - A then B, back to back: when A goes the waiter must look again, not
//     take B for the last one left (nor A for the last one at all);
//   - B, then A a while later: meanwhile core's 500 ms re-check has the
//     waiter watch the holder's node, and A's going (its earlier watch
//     still fires) must not pass for the holder's.
// Either way it must not take the lock while its holder still has it.
TEST_F(ZooKeeperFault, ContendersLeavingMidQueueFreeNothingForTheOnesBehind) {
  ZooKeeperEnsemble zk(dir_.path(), 1);
  zhandle_t* zh = zookeeper_init(hosts(zk).c_str(), nullptr, 5000, nullptr, nullptr, 0);
  ASSERT_TRUE(zh);
  ASSERT_TRUE(eventually([&] { return zoo_state(zh) == ZOO_CONNECTED_STATE; }, 10s));
  auto holder = connect(zk.url() + root());
  auto behind = connect(zk.url() + root());
  for (const bool a_first : {true, false}) {
    SCOPED_TRACE(a_first ? "A then B" : "B, then A");
    const std::string name = a_first ? "mid-queue-a-first" : "mid-queue-b-first";
    const std::string path = root() + "/" + name;
    auto held = holder->mutex(name);
    held.lock();
    std::vector<std::string> others;  // A, B
    for (const char* id : {"1", "2"}) {
      char made[512];
      const std::string prefix = path + "/_c_00000000-0000-0000-0000-00000000000" + id + "-lock-";
      ASSERT_EQ(zoo_create(zh, prefix.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, made,
                           sizeof made),
                ZOK);
      others.emplace_back(made);
    }
    std::atomic<bool> behind_holds{false};
    std::jthread waits([&](std::stop_token stop) {
      auto m = behind->mutex(name);
      if (!m.try_lock_for(scaled(30s))) return;
      behind_holds = true;
      while (!stop.stop_requested()) std::this_thread::sleep_for(5ms);
      m.unlock();
    });
    ASSERT_TRUE(eventually([&] { return count_children(hosts(zk), path) == 4; }, 10s));
    std::this_thread::sleep_for(100ms);  // let it watch A

    if (!a_first) std::swap(others[0], others[1]);
    EXPECT_EQ(zoo_delete(zh, others[0].c_str(), -1), ZOK);
    if (!a_first) std::this_thread::sleep_for(1s);  // two of core's re-checks
    EXPECT_EQ(zoo_delete(zh, others[1].c_str(), -1), ZOK);
    std::this_thread::sleep_for(scaled(1s));  // time for a wrong grant to show
    EXPECT_FALSE(behind_holds) << "a waiter took the lock while its holder still had it";
    held.unlock();
    EXPECT_TRUE(eventually([&] { return behind_holds.load(); }, 10s)) << "the waiter behind never got the lock";
  }
  zookeeper_close(zh);
}

TEST_F(ZooKeeperFault, LeaderKilledWhileHeldNoSecondHolderAndTheLockGoesOn) {
  ZooKeeperEnsemble zk(dir_.path(), 3);
  FencedResource resource(dir_.path() + "/resource", true);
  const std::string url = zk.url() + root() + "?session_timeout=6s&lost_on=expiry";
  auto holder = connect(url);
  auto m = holder->mutex("failover", {.lease = 3s});
  m.lock();
  const auto first = m.token();
  ASSERT_TRUE(resource.write(first, 1));
  auto rival = connect(url);
  auto r = rival->mutex("failover");
  ASSERT_FALSE(r.try_lock());

  const int leader = zk.leader();
  ASSERT_GE(leader, 0);
  zk.kill(leader);
  // Until a new leader serves, and for a while after: never a second holder.
  const auto until = steady::now() + scaled(8s);
  bool reelected = false;
  while (steady::now() < until) {
    try {
      EXPECT_FALSE(r.try_lock()) << "a second holder during the failover";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), errc::unavailable) << e.what();  // no quorum yet
    }
    if (!reelected) reelected = zk.wait_serving(10ms);
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(reelected || zk.wait_serving(scaled(20s))) << "no new leader";
  EXPECT_FALSE(m.lost()) << "the holder's session should survive a leader change";
  EXPECT_TRUE(resource.write(first, 1)) << "the holder's token was refused after the failover";
  EXPECT_TRUE(m.unlock_checked().ok());
  ASSERT_TRUE(r.try_lock_for(scaled(10s))) << "the lock does not work after the re-election";
  EXPECT_GT(r.token(), first) << "tokens must grow across a leader change (the zxid's epoch)";
  EXPECT_TRUE(resource.write(r.token(), 2));
  r.unlock();
  zk.start(leader);  // rejoins as a follower
  EXPECT_TRUE(zk.wait_serving(scaled(20s)));
}

// A create applied by the ensemble whose reply is lost with the connection
// (the session lives on): the client finds its node again by its prefix
// instead of failing or making a second one, and the node keeps its place —
// a contender that queued after it still comes after it.
TEST_F(ZooKeeperFault, CreateWhoseReplyWasLostIsFoundAndKeepsItsPlace) {
  ZooKeeperEnsemble zk(dir_.path(), 1);
  TcpProxy proxy(zk.client_port(0));
  const std::string direct = zk.url() + root();
  auto first = connect(direct);
  auto held = first->mutex("lost-reply");
  held.lock();
  auto cut_off = connect(via(proxy, "session_timeout=10s"));  // outlives the cut
  auto later = connect(direct);

  proxy.cut_at_reply("/lost-reply/_c_");  // the create's reply names the node it made
  std::atomic<bool> cut_off_holds{false}, cut_off_failed{false}, later_holds{false};
  std::uint64_t cut_off_token = 0, later_token = 0;
  std::string cut_off_error;  // set before cut_off_failed
  auto failure = [&] { return cut_off_failed ? cut_off_error : std::string(); };
  std::jthread cut_off_thread([&](std::stop_token stop) {
    auto m = cut_off->mutex("lost-reply");
    try {
      if (!m.try_lock_for(scaled(20s))) return;
    } catch (const Error& e) {
      cut_off_error = e.what();
      cut_off_failed = true;
      return;
    }
    cut_off_token = m.token();
    cut_off_holds = true;
    while (!stop.stop_requested()) std::this_thread::sleep_for(5ms);
    m.unlock();
  });
  ASSERT_TRUE(eventually([&] { return !proxy.dropped_reply().empty(); }, 10s)) << "the create's reply never came";
  std::smatch made;
  const std::string reply = proxy.dropped_reply();
  ASSERT_TRUE(std::regex_search(reply, made, std::regex("_c_[0-9a-f-]{36}-lock-[0-9]{10}")));
  const std::string lost = made.str();  // the node the ensemble made before the cut
  const std::string prefix = lost.substr(0, lost.size() - 10);

  std::jthread later_thread([&](std::stop_token stop) {
    auto m = later->mutex("lost-reply");
    if (!m.try_lock_for(scaled(20s))) return;
    later_token = m.token();
    later_holds = true;
    while (!stop.stop_requested()) std::this_thread::sleep_for(5ms);
    m.unlock();
  });
  ASSERT_TRUE(eventually([&] { return count_children(hosts(zk), root() + "/lost-reply") == 3; }, 10s))
      << "expected the holder's, the cut-off client's and the later one's nodes; cut-off client: " << failure();
  auto nodes = children_of(hosts(zk), root() + "/lost-reply");
  ASSERT_TRUE(nodes);
  EXPECT_EQ(std::count_if(nodes->begin(), nodes->end(), [&](const std::string& n) { return n.starts_with(prefix); }),
            1);
  EXPECT_NE(std::find(nodes->begin(), nodes->end(), lost), nodes->end()) << "the node made before the cut is gone";

  held.unlock();
  ASSERT_TRUE(eventually([&] { return cut_off_holds.load(); }, 10s)) << failure();
  EXPECT_FALSE(later_holds) << "the contender that queued after the lost reply went first";
  nodes = children_of(hosts(zk), root() + "/lost-reply");
  ASSERT_TRUE(nodes);
  EXPECT_EQ(nodes->size(), 2u);
  EXPECT_NE(std::find(nodes->begin(), nodes->end(), lost), nodes->end());
  cut_off_thread.request_stop();
  ASSERT_TRUE(eventually([&] { return later_holds.load(); }, 10s));
  EXPECT_GT(later_token, cut_off_token);
}

// The same lost reply, but the session expires before the client can
// reconnect: the node made before the cut died with it, so the client makes
// one in its new session (and doesn't wait for, or adopt, the dead one).
TEST_F(ZooKeeperFault, CreateWhoseReplyWasLostWithItsSessionIsMadeAgain) {
  ZooKeeperEnsemble zk(dir_.path(), 1);
  TcpProxy proxy(zk.client_port(0));
  auto c = connect(via(proxy, "session_timeout=2s"), {.op_timeout = scaled(20s)});
  auto m = c->mutex("lost-session");
  m.lock();  // the lock's node exists from now on: the next create is the only one to name it
  m.unlock();
  proxy.cut_at_reply("/lost-session/_c_", true);
  std::jthread unblock([&] {
    if (!eventually([&] { return !proxy.dropped_reply().empty(); }, 10s)) return;
    std::this_thread::sleep_for(4s);  // past the 2 s session timeout: the ensemble expires it
    proxy.black_hole(false);
  });
  ASSERT_TRUE(m.try_lock_for(scaled(20s))) << "no lock after the session was replaced";
  unblock.join();
  std::smatch made;
  const std::string reply = proxy.dropped_reply();
  ASSERT_TRUE(std::regex_search(reply, made, std::regex("_c_[0-9a-f-]{36}-lock-[0-9]{10}")));
  const std::string lost = made.str();
  auto nodes = children_of(hosts(zk), root() + "/lost-session");
  ASSERT_TRUE(nodes);
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_NE(nodes->front(), lost) << "the node of the expired session is held";
  EXPECT_TRUE(nodes->front().starts_with(lost.substr(0, lost.size() - 10))) << nodes->front();
  m.unlock();
}

TEST_F(ZooKeeperFault, StoppedServerCallsFailWithinTheirTimeout) {
  ZooKeeperEnsemble zk(dir_.path(), 1);
  auto c = connect(zk.url() + root(), {.op_timeout = 1s});
  auto m = c->mutex("stopped");
  m.lock();  // the lock's node exists: a create sent now is applied once the server runs
  m.unlock();
  ASSERT_TRUE(stop_process(zk.pid(0)));
  const auto start = steady::now();
  try {
    m.lock();
    ADD_FAILURE() << "locked on a stopped server";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), errc::unavailable) << e.what();
  }
  EXPECT_LT(steady::now() - start, 1s + scaled(1s));
  EXPECT_FALSE(c->ping().ok());
  ::kill(zk.pid(0), SIGCONT);
  EXPECT_TRUE(eventually([&] { return c->ping().ok(); }, 10s));
  // The create sent while the server was stopped is applied once it runs
  // again, after the caller gave up: that node must not stay (it would
  // block the queue for as long as this session lives) nor be doubled.
  ASSERT_TRUE(m.try_lock_for(scaled(10s))) << "the unanswered create's node blocks the lock";
  EXPECT_EQ(count_children(hosts(zk), root() + "/stopped"), 1);
  m.unlock();
  EXPECT_TRUE(eventually([&] { return count_children(hosts(zk), root() + "/stopped") == 0; }, 5s));
}

// A server stopped for longer than its clients take to call their
// connections dead (2/3 of the session timeout) but shorter than the
// session timeout and op_timeout, while four processes pass a lock (`how`:
// "" for a Mutex, "semaphore" for a one-permit Semaphore) around: no wait
// fails — a waiter whose reply went with the connection looks again once
// it is back — and no two hold at once. Processes, not threads: the C
// client formats a dropped connection's message in a static buffer, so
// several handles of one process dropping at once race there.
void ride_through_a_server_pause(const ZooKeeperEnsemble& zk, const std::string& url, const std::string& dir,
                                 const std::string& how) {
  constexpr int processes = 4, sections = 250;
  FencedResource resource(dir + "/resource", true);
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int i = 0; i < processes; ++i) {
    std::vector<std::string> args{DLOCK_TEST_WORKER, "hammer", url, "handoffs", std::to_string(sections),
                                  dir + "/resource", "200"};
    if (!how.empty()) args.push_back(how);
    workers.push_back(std::make_unique<ChildProcess>(args));
  }
  EXPECT_TRUE(eventually([&] { return resource.counts().accepted > 20; }, scaled(20s))) << "the lock never changed hands";
  EXPECT_TRUE(stop_process(zk.pid(0)));
  const auto before = resource.counts().accepted;
  std::this_thread::sleep_for(3200ms);  // past 2/3 of 4 s: every client drops its connection
  ::kill(zk.pid(0), SIGCONT);
  EXPECT_LT(before, static_cast<std::uint64_t>(processes * sections)) << "the run ended before the pause";
  for (auto& w : workers)
    EXPECT_EQ(w->wait(scaled(120s)), std::optional<int>(0)) << "worker " << w->pid() << " failed or hung";
  const auto counts = resource.counts();
  EXPECT_EQ(counts.overlaps, 0u);
  EXPECT_EQ(counts.stale_rejected, 0u);
  EXPECT_EQ(counts.counter, processes * sections) << "lost updates under the lock";
}

TEST_F(ZooKeeperFault, WaitersRideThroughAServerPauseShorterThanTheirTimeout) {
  ZooKeeperEnsemble zk(dir_.path(), 1);
  ride_through_a_server_pause(zk, zk.url() + root() + "?session_timeout=4s", dir_.path(), "");
}

TEST_F(ZooKeeperFault, PermitWaitersRideThroughAServerPauseShorterThanTheirTimeout) {
  ZooKeeperEnsemble zk(dir_.path(), 1);
  ride_through_a_server_pause(zk, zk.url() + root() + "?session_timeout=4s", dir_.path(), "semaphore");
}

// unlock() sends the delete and returns: a stopped server does not hold it
// up (unlock_checked() waits, and fails within op_timeout). The delete runs
// when the server resumes, and its answer is counted then.
TEST_F(ZooKeeperFault, UnlockDoesNotWaitForTheServer) {
  ZooKeeperEnsemble zk(dir_.path(), 1);
  auto c = connect(zk.url() + root(), {.op_timeout = 1s});
  auto m = c->mutex("async"), checked = c->mutex("checked");
  m.lock();
  checked.lock();
  expect_unlock_does_not_wait(
      m, checked, [&] { ASSERT_TRUE(stop_process(zk.pid(0))); }, [&] { ::kill(zk.pid(0), SIGCONT); },
      errc::unavailable);
  auto other = connect(zk.url() + root());
  auto taker = other->mutex("async");
  EXPECT_TRUE(taker.try_lock_for(scaled(5s))) << "the delete sent by unlock() never ran";
  taker.unlock();
  EXPECT_TRUE(eventually([&] { return c->stats().releases == 1; }, scaled(5s)))
      << "the answer to unlock()'s delete was not counted as a release";
  EXPECT_EQ(c->stats().failed_releases, 1u);  // unlock_checked()'s, which gave up
  EXPECT_TRUE(eventually([&] { return count_children(hosts(zk), root() + "/checked") == 0; }, scaled(5s)))
      << "the node unlock_checked() gave up on was not deleted later";
}

// A leader cut off from the ensemble stops leading before anyone else leads
// (lost_on=suspend): its stop_token fires, and the next candidate takes over
// once the old node is gone.
TEST_F(ZooKeeperFault, DroppedConnectionEndsLeadershipAndTheNextCandidateLeads) {
  ZooKeeperEnsemble zk(dir_.path(), 1);
  TcpProxy proxy(zk.client_port(0));
  auto leader_client = connect(via(proxy, "session_timeout=10s"));
  auto leader = leader_client->election("leader");
  leader.campaign("first");
  const auto first_token = leader.token();
  std::atomic<bool> stopped{false};
  std::stop_callback on_lost(leader.stop_token(), [&] { stopped = true; });
  auto other = connect(zk.url() + root());
  auto next = other->election("leader");
  proxy.cut();  // the client reconnects at once, same session
  EXPECT_TRUE(eventually([&] { return stopped.load(); }, 3s)) << "a suspended leader's stop_token never fired";
  EXPECT_FALSE(leader.is_leader());
  EXPECT_TRUE(leader.lost());
  ASSERT_TRUE(next.campaign_for(scaled(8s), "second")) << "the dropped leader's node was left until its session expired";
  EXPECT_GT(next.token(), first_token);
  EXPECT_EQ(next.leader(), "second");
  EXPECT_EQ(leader.resign_checked().code(), errc::lock_lost);
  EXPECT_EQ(next.leader(), "second") << "the old leader's resign removed the new leader";
  next.resign();
}

// A leader whose node someone else deletes learns it at its next check.
TEST_F(ZooKeeperFault, DeletedLeaderNodeEndsLeadership) {
  ZooKeeperEnsemble zk(dir_.path(), 1);
  auto c = connect(zk.url() + root());
  auto election = c->election("deleted");
  election.campaign("only");
  auto nodes = children_of(hosts(zk), root() + "/deleted");
  ASSERT_TRUE(nodes && nodes->size() == 1u);
  EXPECT_NE(nodes->front().find("-latch-"), std::string::npos) << nodes->front();
  zhandle_t* zh = zookeeper_init(hosts(zk).c_str(), nullptr, 5000, nullptr, nullptr, 0);
  ASSERT_TRUE(zh);
  ASSERT_TRUE(eventually([&] { return zoo_state(zh) == ZOO_CONNECTED_STATE; }, 10s));
  EXPECT_EQ(zoo_delete(zh, (root() + "/deleted/" + nodes->front()).c_str(), -1), ZOK);
  zookeeper_close(zh);
  // A watch on its own node tells the leader at once; the watchdog alone
  // would take up to lease / 3 (10 s by default).
  EXPECT_TRUE(eventually([&] { return election.stop_token().stop_requested(); }, 3s))
      << "the leader did not learn at once that its node was deleted";
  EXPECT_FALSE(election.is_leader());
  EXPECT_EQ(election.leader(), std::nullopt);
  EXPECT_EQ(election.resign_checked().code(), errc::lock_lost);
}

// A barrier member waiting to enter, and one arriving, on a stopped server:
// unavailable within op_timeout (plus one safety re-read, plus the removal
// of its node, itself bounded by op_timeout), and neither leaves a member
// node once the server runs again.
TEST_F(ZooKeeperFault, BarrierCallsOnAStoppedServerFailWithinTheirTimeoutAndLeaveNoNode) {
  ZooKeeperEnsemble zk(dir_.path(), 1);
  auto c = connect(zk.url() + root(), {.op_timeout = 1s});
  auto waiting = c->barrier("stopped", 2);
  auto arrival = std::async(std::launch::async, [&] { waiting.arrive_and_wait(); });
  ASSERT_TRUE(eventually([&] { return count_children(hosts(zk), root() + "/stopped") == 1; }, 10s));
  ASSERT_TRUE(stop_process(zk.pid(0)));
  const auto start = steady::now();
  ASSERT_EQ(arrival.wait_for(scaled(10s)), std::future_status::ready) << "a waiting member hung";
  try {
    arrival.get();
    ADD_FAILURE() << "entered on a stopped server";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), errc::unavailable) << e.what();
  }
  // The failed check (op_timeout, after at most one 500 ms re-read wait),
  // then taking the member's node out, which waits up to op_timeout for the
  // store too: 2.5 s at worst, plus a loaded machine's slack.
  EXPECT_LT(steady::now() - start, 2500ms + scaled(1s));
  EXPECT_FALSE(waiting.entered());
  auto late = c->barrier("stopped", 2);
  const auto late_start = steady::now();
  try {
    late.arrive_and_wait();
    ADD_FAILURE() << "entered on a stopped server";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), errc::unavailable) << e.what();
  }
  EXPECT_LT(steady::now() - late_start, 1s + scaled(1s));
  ::kill(zk.pid(0), SIGCONT);
  EXPECT_TRUE(eventually([&] { return count_children(hosts(zk), root() + "/stopped") == 0; }, 10s))
      << "a failed member's node stayed";
}

// A member whose session expires while it waits to enter no longer counts:
// it is told it is out — unavailable if its safety re-read meets the
// partition, lock_lost if it first looks after the expiry — and can arrive
// again in its new session.
TEST_F(ZooKeeperFault, BarrierMemberWhoseSessionExpiresIsToldItIsOut) {
  ZooKeeperEnsemble zk(dir_.path(), 1);
  TcpProxy proxy(zk.client_port(0));
  auto c = connect(via(proxy, "session_timeout=2s"), {.op_timeout = 15s});
  auto member = c->barrier("expiring", 2);
  auto arrival = std::async(std::launch::async, [&] { return member.arrive_and_wait_for(scaled(30s)); });
  ASSERT_TRUE(eventually([&] { return count_children(hosts(zk), root() + "/expiring") == 1; }, 10s));
  proxy.black_hole(true);
  // The ensemble expires the session and deletes its member node.
  EXPECT_TRUE(eventually([&] { return count_children(hosts(zk), root() + "/expiring") == 0; }, 15s));
  proxy.black_hole(false);
  ASSERT_EQ(arrival.wait_for(scaled(20s)), std::future_status::ready) << "the member never learnt it was out";
  try {
    (void)arrival.get();
    ADD_FAILURE() << "entered with an expired member node";
  } catch (const Error& e) {
    EXPECT_TRUE(e.kind() == errc::unavailable || e.kind() == errc::lock_lost) << e.what();
  }
  EXPECT_FALSE(member.entered());
  auto other_client = connect(zk.url() + root());
  auto other = other_client->barrier("expiring", 2);
  auto again = std::async(std::launch::async, [&] { return member.arrive_and_wait_for(scaled(20s)); });
  EXPECT_TRUE(other.arrive_and_wait_for(scaled(20s)));
  EXPECT_TRUE(again.get());
}

}  // namespace
}  // namespace dlock::test
