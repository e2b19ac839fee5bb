// PostgreSQL under faults: a server restarted (a crash to its clients),
// stopped (SIGSTOP) and killed while locks are held, the rights a database
// user needs, and TLS with a CA the test makes (libpq's sslmode, sslrootcert
// passed through). Each test starts its own server
// (scripts/postgres-server.sh) in a temp dir, because it breaks it.
#include "child_process.h"
#include "stopped_store.h"
#include "thrown.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <thread>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// Runs `command`; its output (stdout and stderr) and whether it succeeded.
std::pair<bool, std::string> shell(const std::string& command) {
  std::string out;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return {false, ""};
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  return {::pclose(p) == 0, out};
}

class PostgresFault : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server("start")) << "could not start PostgreSQL"; }
  void TearDown() override { (void)server("stop"); }

  bool server(const std::string& command) {
    auto [ok, out] = shell(env_ + " " + DLOCK_POSTGRES_SCRIPT + " " + command + " " + dir_.path() + "/pg");
    if (!ok) ADD_FAILURE() << command << ": " << out;
    return ok;
  }
  std::string read(const std::string& file) const {
    std::ifstream in(dir_.path() + "/pg/" + file);
    std::string line;
    std::getline(in, line);
    return line;
  }
  std::string url(const std::string& query = "") const { return read("url") + query; }
  // SQL as the superuser.
  void admin(const std::string& sql) {
    auto [ok, out] = shell("psql -q -v ON_ERROR_STOP=1 '" + read("admin_url") + "' -c \"" + sql + "\"");
    ASSERT_TRUE(ok) << sql << ": " << out;
  }

  // The body of the two UnlockDoesNotWaitForTheServer tests (below).
  void unlock_does_not_wait_for_the_server(const std::string& query);

  TempDir dir_;
  std::string env_;  // settings for the script ("POSTGRES_TLS=DIR ...")
};

// A server that takes only TLS (ssl=on, pg_hba.conf: hostssl), with a CA of
// the test's (scripts/test-ca.sh).
class PostgresTls : public PostgresFault {
 protected:
  PostgresTls() { env_ = "POSTGRES_TLS=" + ca() + " POSTGRES_TLS_REQUIRED=1"; }
  std::string ca() const { return dir_.path() + "/ca"; }
  // dlock's user with a password of the test's (the server trusts any: it
  // is there to be looked for in messages) and `query`.
  std::string url_with(const std::string& query) const {
    return "postgres://dlock:" + std::string(password) + "@127.0.0.1:" + read("port") + "/dlock?" + query;
  }
  static constexpr const char* password = "Pg5ecretXy42";

  // Connecting with `query` fails with `kind` within op_timeout (1 s),
  // saying `named` and never the password.
  void refused(const std::string& query, const std::string& named, errc kind = errc::unavailable) {
    expect_refused_within([&] { (void)connect(url_with(query), {.op_timeout = 1s}); }, kind, 1s + scaled(1500ms),
                          named, password, query);
  }
  // The certificate and key options for the client certificate in `dir`.
  static std::string client_cert(const std::string& dir) {
    return "&sslcert=" + dir + "/client.pem&sslkey=" + dir + "/client.key";
  }
  // What the admin's query prints (its first line).
  std::string admin_query(const std::string& sql) const {
    auto [ok, out] = shell("psql -At '" + read("admin_url") + "' -c \"" + sql + "\"");
    EXPECT_TRUE(ok) << sql << ": " << out;
    return out.substr(0, out.find('\n'));
  }
};

// The same, and dlock's role gets in only with a client certificate signed
// by the test's CA whose CN is dlock (pg_hba.conf: cert).
class PostgresClientCert : public PostgresTls {
 protected:
  PostgresClientCert() { env_ += " POSTGRES_TLS_CLIENT_CERT=1"; }
};

TEST_F(PostgresFault, TokensKeepIncreasingAcrossARestart) {
  std::uint64_t before = 0;
  {
    auto client = connect(url());
    auto m = client->mutex("orders");
    for (int i = 0; i < 3; ++i) {
      std::lock_guard hold(m);
      before = m.token();
    }
  }
  ASSERT_TRUE(server("restart"));
  auto client = connect(url());
  auto m = client->mutex("orders");
  std::lock_guard hold(m);
  EXPECT_GT(m.token(), before) << "a token was issued again after the restart";
}

// The hold is a row: a server back within the lease has it, the holder's
// renewals (on new connections) keep it, and no one else gets the lock.
TEST_F(PostgresFault, HoldOutlivesAShortRestartThroughItsRow) {
  auto holder_client = connect(url(), {.op_timeout = 1s});
  auto holder = holder_client->mutex("jobs/nightly", {.lease = 6s});
  holder.lock();
  ASSERT_TRUE(server("restart"));
  std::this_thread::sleep_for(scaled(7s));  // past the lease: renewals after the restart kept it
  EXPECT_FALSE(holder.lost()) << "the holder lost a lock the restarted server still had for it";
  auto other = connect(url())->mutex("jobs/nightly");
  EXPECT_FALSE(other.try_lock()) << "another client took a lock whose holder kept renewing it";
  EXPECT_TRUE(holder.unlock_checked());
  EXPECT_TRUE(other.try_lock());
  other.unlock();
}

TEST_F(PostgresFault, StoppedServerFailsCallsWithinTheTimeoutAndHoldersLearnTheyLost) {
  auto client = connect(url(), {.op_timeout = 500ms});
  auto held = client->mutex("held", {.lease = 1500ms});
  held.lock();
  auto other = client->mutex("other");
  ASSERT_TRUE(server("pause"));
  const auto start = steady::now();
  EXPECT_EQ(thrown([&] { (void)other.try_lock(); }), errc::unavailable);
  EXPECT_LT(steady::now() - start, scaled(2s)) << "a call to a stopped server outlived op_timeout";
  EXPECT_TRUE(eventually([&] { return held.lost(); }, 3s)) << "the holder never learnt its lease ran out";
  ASSERT_TRUE(server("resume"));
  held.unlock();
  // The client recovers: fresh connections replace the ones that timed out.
  EXPECT_TRUE(eventually([&] {
    try {
      if (!other.try_lock()) return false;
      other.unlock();
      return true;
    } catch (const Error&) {
      return false;
    }
  }, 5s));
}

// unlock() sends the release and returns: a stopped server does not hold it
// up, while unlock_checked() waits for the answer and fails within
// op_timeout. The release runs once the server resumes (the server reads
// what the client wrote before it gave up on the connection). `query`: the
// url's, for the mode.
void PostgresFault::unlock_does_not_wait_for_the_server(const std::string& query) {
  auto client = connect(url(query), {.op_timeout = 1s});
  auto m = client->mutex("async"), checked = client->mutex("checked");
  m.lock();
  checked.lock();
  // (Session mode: the holding connection failed, so the server freed it: lock_lost.)
  expect_unlock_does_not_wait(
      m, checked, [&] { ASSERT_TRUE(server("pause")); }, [&] { ASSERT_TRUE(server("resume")); },
      query.empty() ? std::optional(errc::unavailable) : std::optional(errc::lock_lost));
  expect_the_release_ran(*client, *connect(url(query), {.op_timeout = 1s}));
}

TEST_F(PostgresFault, UnlockDoesNotWaitForTheServer) { unlock_does_not_wait_for_the_server(""); }
TEST_F(PostgresFault, SessionUnlockDoesNotWaitForTheServer) { unlock_does_not_wait_for_the_server("?mode=session"); }

// A release sent without waiting that fails on the server, inside its
// transaction (a trigger refuses it): the thread's next call, written behind
// it in the same pipeline, ran into that aborted transaction (SQLSTATE
// 25P02) and changed nothing, so it is sent again on a clean connection and
// succeeds; the failed release is counted, not thrown at the next caller.
TEST_F(PostgresFault, ACallPipelinedBehindAFailedReleaseIsSentAgain) {
  auto client = connect(url(), {.op_timeout = 2s});
  auto doomed = client->mutex("doomed"), next = client->mutex("next");
  doomed.lock();
  admin(
      "CREATE FUNCTION dlock_test_refuse() RETURNS trigger LANGUAGE plpgsql AS "
      "'BEGIN IF OLD.name = ''doomed'' THEN RAISE EXCEPTION ''release refused''; END IF; RETURN OLD; END'; "
      "CREATE TRIGGER dlock_test_refuse BEFORE DELETE ON dlock_holds FOR EACH ROW "
      "EXECUTE FUNCTION dlock_test_refuse()");
  doomed.unlock();  // refused by the server, answered later
  EXPECT_TRUE(next.try_lock()) << "the call behind the failed release did not run";
  EXPECT_TRUE(next.unlock_checked().ok());
  const auto stats = client->stats();
  EXPECT_EQ(stats.failed_releases, 1u);
  EXPECT_EQ(stats.releases, 1u);
  admin("DROP TRIGGER dlock_test_refuse ON dlock_holds");
  // The refused release freed nothing: "doomed" is held until its lease ends.
  auto other = connect(url());
  EXPECT_FALSE(other->mutex("doomed").try_lock()) << "the refused release freed the lock";
}

TEST_F(PostgresFault, KilledServerIsUnavailableNotAHang) {
  auto client = connect(url(), {.op_timeout = 500ms});
  auto m = client->mutex("m");
  ASSERT_TRUE(server("kill"));
  const auto start = steady::now();
  EXPECT_EQ(thrown([&] { m.lock(); }), errc::unavailable);
  EXPECT_EQ(thrown([&] { (void)connect(url(), {.op_timeout = 500ms}); }), errc::unavailable);
  EXPECT_LT(steady::now() - start, scaled(3s));
}

TEST_F(PostgresFault, ALeastPrivilegeUserWorksAndOneWithoutRightsIsToldWhatToRun) {
  // dlock's tables made once (by the database's owner) in schema locks.
  (void)connect(url("?schema=locks"));
  admin("CREATE ROLE app LOGIN; GRANT USAGE ON SCHEMA locks TO app; "
        "GRANT SELECT, INSERT, UPDATE, DELETE ON locks.dlock_holds, locks.dlock_fences, locks.dlock_waiters, "
        "locks.dlock_counts, locks.dlock_ping TO app");
  const std::string port = read("port");
  const std::string app = "postgres://app@127.0.0.1:" + port + "/dlock";
  {
    auto client = connect(app + "?schema=locks");
    auto m = client->mutex("stock:1");
    std::lock_guard hold(m);
    EXPECT_GT(m.token(), 0u);
  }
  // A schema the user may use but not create tables in: refused with the DDL.
  admin("CREATE SCHEMA empty; GRANT USAGE ON SCHEMA empty TO app");
  std::string message;
  try {
    (void)connect(app + "?schema=empty");
    ADD_FAILURE() << "connected without dlock's tables";
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("may not create them"), std::string::npos) << message;
  EXPECT_NE(message.find("CREATE TABLE IF NOT EXISTS dlock_holds"), std::string::npos) << message;
  EXPECT_NE(message.find("GRANT SELECT, INSERT, UPDATE, DELETE"), std::string::npos) << message;
}

// Session mode: a restart ends every session and with them the locks; the
// holder learns it at its next renewal, never assumes it still holds.
TEST_F(PostgresFault, SessionHoldersLearnARestartFreedTheirLocks) {
  auto holder_client = connect(url("?mode=session"), {.op_timeout = 1s});
  auto holder = holder_client->mutex("jobs/report", {.lease = 1500ms});
  holder.lock();
  const auto before = holder.token();
  ASSERT_TRUE(server("restart"));
  EXPECT_TRUE(eventually([&] { return holder.lost(); }, 4s)) << "the holder kept believing in a lock the restart freed";
  auto other = connect(url("?mode=session"))->mutex("jobs/report");
  ASSERT_TRUE(other.try_lock());
  EXPECT_GT(other.token(), before);
  other.unlock();
  EXPECT_EQ(holder.unlock_checked().code(), errc::lock_lost);
}

// Session mode maps names to advisory lock keys: names that differ only in
// case, or only after a long common prefix, are still different locks.
TEST_F(PostgresFault, SessionModeNamesNeverShareALock) {
  for (const std::string mode : {"session", "table"}) {
    auto a = connect(url("?mode=" + mode));
    auto b = connect(url("?mode=" + mode));
    const std::string prefix(400, 'p');
    const std::pair<std::string, std::string> pairs[] = {
        {"Stock:1", "stock:1"}, {prefix + "a", prefix + "b"}, {"x", "x "}};
    for (const auto& [first, second] : pairs) {
      auto m1 = a->mutex(first);
      auto m2 = b->mutex(second);
      ASSERT_TRUE(m1.try_lock()) << mode;
      EXPECT_TRUE(m2.try_lock()) << mode << ": '" << second.substr(0, 20) << "' shared a lock with '"
                                 << first.substr(0, 20) << "'";
      if (m2.held_by_current_thread()) m2.unlock();
      m1.unlock();
    }
    // And the same name is one lock.
    auto same1 = a->mutex("Stock:1");
    auto same2 = b->mutex("Stock:1");
    ASSERT_TRUE(same1.try_lock());
    EXPECT_FALSE(same2.try_lock()) << mode;
    same1.unlock();
  }
}

// sslmode=verify-full with the test's CA: the client locks, and the server
// reports its connections encrypted (pg_stat_ssl). A CA that did not sign
// the server's certificate, a CA file that is missing, and TLS off (the
// server takes only TLS) are each refused within op_timeout, saying why.
TEST_F(PostgresTls, VerifiedTlsLocksAndBadTlsSettingsAreRefused) {
  const std::string other_ca = dir_.path() + "/other-ca";
  ASSERT_TRUE(shell(std::string(DLOCK_TEST_CA_SCRIPT) + " " + other_ca).first);
  {
    auto client = connect(url_with("sslmode=verify-full&sslrootcert=" + ca() + "/ca.pem"), {.op_timeout = 2s});
    auto m = client->mutex("jobs");
    std::lock_guard hold(m);
    EXPECT_GT(m.token(), 0u);
    // Every connection of dlock's user, and how many of them are encrypted.
    auto [ok, seen] = shell("psql -At '" + read("admin_url") +
                            "' -c \"SELECT count(*) || ' ' || count(*) FILTER (WHERE ssl) FROM pg_stat_ssl "
                            "JOIN pg_stat_activity USING (pid) WHERE usename = 'dlock'\"");
    ASSERT_TRUE(ok) << seen;
    seen = seen.substr(0, seen.find('\n'));
    const auto space = seen.find(' ');
    ASSERT_NE(space, std::string::npos) << seen;
    EXPECT_NE(seen.substr(0, space), "0") << "no connection of dlock's user is open";
    EXPECT_EQ(seen.substr(0, space), seen.substr(space + 1)) << "unencrypted connections (all, encrypted): " << seen;
  }
  refused("sslmode=verify-full&sslrootcert=" + other_ca + "/ca.pem", "certificate verify failed");
  refused("sslmode=disable", "no encryption");
  // A file that isn't there is bad input, named before any connection.
  refused("sslmode=verify-full&sslrootcert=" + dir_.path() + "/missing.pem",
          "sslrootcert='" + dir_.path() + "/missing.pem' cannot be read", errc::invalid_argument);
}

// sslcert and sslkey reach libpq: with the test's client certificate the
// client locks, and the server saw that certificate on every connection of
// dlock's role. Without one, or with one of another CA, the server refuses;
// a certificate or key file that isn't there is named before connecting
// (libpq would go on without the certificate).
TEST_F(PostgresClientCert, ClientCertificateLocksAndAMissingOrForeignOneIsRefused) {
  const std::string other_ca = dir_.path() + "/other-ca";
  ASSERT_TRUE(shell(std::string(DLOCK_TEST_CA_SCRIPT) + " " + other_ca).first);
  const std::string verified = "sslmode=verify-full&sslrootcert=" + ca() + "/ca.pem";
  {
    auto client = connect(url_with(verified + client_cert(ca())), {.op_timeout = 2s});
    auto m = client->mutex("jobs");
    std::lock_guard hold(m);
    EXPECT_GT(m.token(), 0u);
    EXPECT_EQ(admin_query("SELECT count(*) > 0 AND bool_and(coalesce(client_dn, '') = '/CN=dlock') "
                          "FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) WHERE usename = 'dlock'"),
              "t")
        << "dlock's connections did not all show the client certificate";
  }
  refused(verified, "requires a valid client certificate");
  refused(verified + client_cert(other_ca), "unknown ca");
  refused(verified + "&sslcert=" + ca() + "/missing.pem&sslkey=" + ca() + "/client.key",
          "sslcert='" + ca() + "/missing.pem' cannot be read", errc::invalid_argument);
  refused(verified + "&sslcert=" + ca() + "/client.pem&sslkey=" + ca() + "/missing.key",
          "sslkey='" + ca() + "/missing.key' cannot be read", errc::invalid_argument);
}

}  // namespace
}  // namespace dlock::test
