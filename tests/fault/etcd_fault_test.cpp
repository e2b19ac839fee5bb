// etcd under faults: a holder killed, a member stopped (SIGSTOP) while a lock
// is held and while calls are made, and a 3-member cluster whose leader is
// killed while a lock is held. Each test starts its own etcd
// (scripts/etcd-server.sh) in a temp dir, because it stops or kills it.
#include "child_process.h"
#include "fenced_resource.h"
#include "thrown.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

int run(const std::string& command) { return std::system(command.c_str()); }

// A throw-away etcd of `members` members, stopped when the test ends.
class Etcd {
 public:
  Etcd(const TempDir& dir, int members) : dir_(dir.path() + "/etcd") {
    ok_ = run(script() + " start " + dir_ + " " + std::to_string(members) + " >/dev/null") == 0;
  }
  ~Etcd() { (void)run(script() + " stop " + dir_ + " >/dev/null 2>&1"); }
  bool ok() const { return ok_; }
  std::string url() const {
    std::ifstream in(dir_ + "/url");
    std::string url;
    in >> url;
    return url;
  }
  bool act(const std::string& what, int member = 1) {
    return run(script() + " " + what + " " + dir_ + " " + std::to_string(member) + " >/dev/null") == 0;
  }
  int leader() {
    std::string out;
    if (FILE* p = ::popen((script() + " leader " + dir_).c_str(), "r")) {
      char buf[64];
      while (std::fgets(buf, sizeof buf, p)) out += buf;
      ::pclose(p);
    }
    return out.empty() ? 0 : std::stoi(out);
  }

 private:
  static std::string script() { return DLOCK_ETCD_SCRIPT; }
  std::string dir_;
  bool ok_ = false;
};

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
TEST(EtcdFault, AuthenticatedClientsLockAndBadCredentialsAreRefusedWithoutEcho) {
  TempDir dir;
  ::setenv("ETCD_EXTRA_ARGS", "--auth-token-ttl 2", 1);
  Etcd etcd(dir, 1);
  ::unsetenv("ETCD_EXTRA_ARGS");
  ASSERT_TRUE(etcd.ok());
  const std::string endpoints = etcd.url().substr(std::string("etcd://").size());
  const std::string ctl = "etcdctl --endpoints " + endpoints + " ";
  const std::string as_root = ctl + "--user root:Root5ecret ";
  ASSERT_EQ(run(ctl + "user add root:Root5ecret >/dev/null && " + ctl + "user grant-role root root >/dev/null && " +
                ctl + "auth enable >/dev/null && " + as_root + "user add alice:Al1ceSecret >/dev/null && " +
                as_root + "role add locks >/dev/null && " + as_root +
                "role grant-permission locks --prefix=true readwrite app >/dev/null && " + as_root +
                "user grant-role alice locks >/dev/null"),
            0);

  auto alice = connect("etcd://alice:Al1ceSecret@" + endpoints + "/app?ttl=5s", {.op_timeout = 2s});
  auto m = alice->mutex("jobs");
  ASSERT_TRUE(m.try_lock());
  m.unlock();
  std::this_thread::sleep_for(3s);  // past the token's 2 s
  EXPECT_TRUE(m.try_lock()) << "an expired auth token was not fetched again";
  m.unlock();

  expect_thrown_naming([&] { (void)connect("etcd://alice:Wr0ngSecret@" + endpoints + "/app")->mutex("jobs").try_lock(); },
                       errc::invalid_argument, "alice", "a wrong password");
  try {
    (void)connect("etcd://alice:Wr0ngSecret@" + endpoints + "/app")->mutex("jobs").try_lock();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("Wr0ngSecret"), std::string::npos) << "the password was echoed: " << e.what();
  }
  EXPECT_EQ(thrown([&] { (void)connect("etcd://alice:Al1ceSecret@" + endpoints + "/other")->mutex("jobs").try_lock(); }),
            errc::invalid_argument)
      << "a prefix alice's role does not cover";
  expect_thrown_naming([&] { (void)connect("etcd://" + endpoints + "/app")->mutex("jobs").try_lock(); },
                       errc::invalid_argument, "give a user and password", "no credentials where auth is on");
}

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

// A 3-member cluster: the leader is killed while a lock is held. The lease
// survives (the new leader keeps it), the holder keeps its lock and token,
// nobody else gets it meanwhile, and the lock works after re-election.
TEST(EtcdFault, LeaderKilledWhileHeldKeepsTheLock) {
  TempDir dir;
  Etcd etcd(dir, 3);
  ASSERT_TRUE(etcd.ok());
  const std::string url = etcd.url() + "/fault?ttl=5s";
  auto holder_client = connect(url, {.op_timeout = 2s});
  auto held = holder_client->mutex("jobs");
  held.lock();
  const auto token = held.token();

  const int leader = etcd.leader();
  ASSERT_GT(leader, 0);
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
  while (steady::now() < until) {
    bool got = false;
    try {
      got = other.try_lock();
    } catch (const Error&) {
      // unavailable during the election: fine
    }
    EXPECT_FALSE(got) << "a second holder while the first holds";
    if (got) other.unlock();
    EXPECT_FALSE(held.lost()) << "the holder lost its lock to a leader change";
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
