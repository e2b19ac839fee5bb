// The etcd:// backend's own behaviour, no fault injected: authentication
// (tokens fetched again once expired, bad credentials refused without
// echo), and TLS (etcds://) with a CA the test makes: clients of a user
// take turns, and misconfigured ones are refused within their timeout. Each
// test starts its own etcd (scripts/etcd-server.sh) in a temp dir, because
// it serves it with its own users or certificates.
#include "child_process.h"
#include "etcd_cluster.h"
#include "fenced_resource.h"
#include "thrown.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;

// Turns authentication on: the user root (password Root5ecret), and `user`
// ("name:password") with a role that may read and write the keys under
// `prefix`. `ctl`: etcdctl and the flags that reach the cluster.
bool enable_auth(const std::string& ctl, const std::string& user, const std::string& prefix) {
  const std::string as_root = ctl + " --user root:Root5ecret ";
  const std::string name = user.substr(0, user.find(':'));
  return run(ctl + " user add root:Root5ecret >/dev/null && " + ctl + " user grant-role root root >/dev/null && " +
             ctl + " auth enable >/dev/null && " + as_root + "user add " + user + " >/dev/null && " + as_root +
             "role add locks >/dev/null && " + as_root + "role grant-permission locks --prefix=true readwrite " +
             prefix + " >/dev/null && " + as_root + "user grant-role " + name + " locks >/dev/null") == 0;
}

TEST(EtcdFault, AuthenticatedClientsLockAndBadCredentialsAreRefusedWithoutEcho) {
  TempDir dir;
  ::setenv("ETCD_EXTRA_ARGS", "--auth-token-ttl 2", 1);
  Etcd etcd(dir, 1);
  ::unsetenv("ETCD_EXTRA_ARGS");
  ASSERT_TRUE(etcd.ok());
  const std::string endpoints = etcd.url().substr(std::string("etcd://").size());
  ASSERT_TRUE(enable_auth("etcdctl --endpoints " + endpoints, "alice:Al1ceSecret", "app"));

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

// A CA the test makes (scripts/test-ca.sh) in `dir`.
std::string make_ca(const std::string& dir) {
  EXPECT_EQ(run(std::string(DLOCK_TEST_CA_SCRIPT) + " " + dir), 0);
  return dir;
}

// etcds:// to a member that serves TLS with the test's CA and has
// authentication on: two clients of a user take turns on one lock, every
// grant's fenced write accepted and the tokens rising, as over plain text;
// a wrong password over TLS is refused without showing it.
TEST(EtcdFault, TlsAuthenticatedClientsTakeTurnsWithRisingTokens) {
  TempDir dir;
  const std::string ca = make_ca(dir.path() + "/ca");
  Etcd etcd(dir, 1, "ETCD_TLS=" + ca);
  ASSERT_TRUE(etcd.ok());
  ASSERT_TRUE(etcd.url().starts_with("etcds://")) << etcd.url();
  ASSERT_TRUE(enable_auth("etcdctl --endpoints " + etcd.endpoints() + " --cacert " + ca + "/ca.pem", "bob:B0bSecret99",
                          "tls"));
  const std::string base = "etcds://bob:%s@" + etcd.endpoints() + "/tls?ttl=5s&ca=" + ca + "/ca.pem";
  const auto with_password = [&](const std::string& password) {
    return std::string(base).replace(base.find("%s"), 2, password);
  };
  expect_refused_within([&] { (void)connect(with_password("Wr0ngSecret77"), {.op_timeout = 2s}); },
                        errc::invalid_argument, scaled(3s), "bob", "Wr0ngSecret77", "a wrong password over TLS");
  const std::string url = with_password("B0bSecret99");
  FencedResource fenced(dir.path() + "/resource", true);
  auto a = connect(url, {.op_timeout = 2s});
  auto b = connect(url, {.op_timeout = 2s});
  auto held = a->mutex("jobs");
  held.lock();
  EXPECT_FALSE(b->mutex("jobs").try_lock()) << "a second holder over TLS";
  const auto first = held.token();
  held.unlock();

  constexpr int rounds = 15;
  std::vector<std::uint64_t> tokens[2];
  auto take_turns = [&](Client& client, int who) {
    auto m = client.mutex("jobs");
    for (int i = 0; i < rounds; ++i) {
      std::unique_lock hold(m);
      tokens[who].push_back(m.token());
      (void)fenced.enter(m.token(), who + 1);
      std::this_thread::sleep_for(1ms);
      fenced.leave(who + 1);
    }
  };
  std::thread other([&] { take_turns(*b, 1); });
  take_turns(*a, 0);
  other.join();
  const auto counts = fenced.counts();
  EXPECT_EQ(counts.accepted, 2u * rounds);
  EXPECT_EQ(counts.stale_rejected + counts.duplicate_tokens + counts.overlaps, 0u);
  for (const auto& mine : tokens) {
    ASSERT_EQ(mine.size(), std::size_t{rounds});
    EXPECT_GT(mine.front(), first);
    for (std::size_t i = 1; i < mine.size(); ++i) EXPECT_GT(mine[i], mine[i - 1]);
  }
}

// A member that asks clients for a certificate (--client-cert-auth): a
// client with one signed by the CA locks; one without it, one that checks
// the member against another CA (or gRPC's default roots), and a plain-text
// etcd:// client are each refused with `unavailable` within op_timeout, the
// TLS ones saying so; so is an etcds:// client of a plain-text member.
TEST(EtcdFault, TlsMisconfiguredClientsFailWithinTheirTimeout) {
  TempDir dir;
  const std::string ca = make_ca(dir.path() + "/ca");
  const std::string other_ca = make_ca(dir.path() + "/other-ca");
  Etcd etcd(dir, 1, "ETCD_TLS=" + ca + " ETCD_TLS_CLIENT_AUTH=1");
  ASSERT_TRUE(etcd.ok());
  const std::string client_cert = "&cert=" + ca + "/client.pem&key=" + ca + "/client.key";
  const std::string base = "etcds://" + etcd.endpoints() + "/tls?ttl=5s";

  auto client = connect(base + "&ca=" + ca + "/ca.pem" + client_cert, {.op_timeout = 500ms});
  auto m = client->mutex("jobs");
  ASSERT_TRUE(m.try_lock());
  EXPECT_GT(m.token(), 0u);
  m.unlock();

  const auto refused = [&](const std::string& url, const std::string& named, const std::string& what) {
    expect_refused_within([&] { (void)connect(url, {.op_timeout = 500ms}); }, errc::unavailable, scaled(1500ms),
                          named, "", what);
  };

  refused(base + "&ca=" + ca + "/ca.pem", "TLS handshake failed", "no client certificate");
  refused(base + "&ca=" + other_ca + "/ca.pem" + client_cert, "TLS handshake failed", "another CA");
  refused(base + client_cert, "TLS handshake failed", "gRPC's default roots, which lack the test's CA");
  refused("etcd://" + etcd.endpoints() + "/tls", "cannot be reached", "plain text to a TLS member");

  TempDir plain_dir;
  Etcd plain(plain_dir, 1);
  ASSERT_TRUE(plain.ok());
  refused("etcds://" + plain.endpoints() + "/tls?ca=" + ca + "/ca.pem", "TLS handshake failed",
          "TLS to a plain-text member");
}

}  // namespace
}  // namespace dlock::test
