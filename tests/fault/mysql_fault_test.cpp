// MySQL/MariaDB under faults: a stopped (SIGSTOP) server, a killed one, one
// restarted, users with too few rights, and TLS with a CA the test makes
// (Connector/C's ssl-ca, ssl-verify-server-cert passed through). Each test
// starts its own
// MariaDB server (scripts/mariadb-server.sh) in a temp dir, because it
// stops, kills or administers it.
#include "child_process.h"
#include "stopped_store.h"
#include "thrown.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

class MysqlFault : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(server("start"), 0) << "could not start MariaDB";
    std::ifstream in(dir_.path() + "/url");
    ASSERT_TRUE(in >> url_);
  }
  void TearDown() override { (void)server("stop"); }

  int server(const std::string& command) {
    const std::string line = env_ + " " + DLOCK_MARIADB_SCRIPT + " " + command + " " + dir_.path() + " >/dev/null";
    return std::system(line.c_str());
  }

  ClientOptions options() const { return {.op_timeout = 1000ms}; }

  // Runs SQL as the server's root user (over its socket); the exit code.
  int admin(const std::string& sql) {
    std::ifstream in(dir_.path() + "/datadir");
    std::string data;
    in >> data;
    const std::string sql_file = dir_.path() + "/admin.sql";
    std::ofstream(sql_file) << sql;
    const std::string line =
        "mariadb --no-defaults -uroot --socket=" + data + "/sock < " + sql_file + " >/dev/null";
    return std::system(line.c_str());
  }

  // The URL with another user and database.
  std::string url_as(const std::string& user_and_password, const std::string& database) const {
    const auto at = url_.find('@'), slash = url_.rfind('/');
    return "mysql://" + user_and_password + url_.substr(at, slash - at) + "/" + database;
  }

  // The body of the two UnlockDoesNotWaitForTheServer tests (below).
  void unlock_does_not_wait_for_the_server(const std::string& query);

  TempDir dir_;
  std::string url_;
  std::string env_;  // settings for the script ("MARIADB_TLS=DIR ...")
};

// A server that takes only TLS over TCP (--require-secure-transport), with
// a CA of the test's (scripts/test-ca.sh).
class MysqlTls : public MysqlFault {
 protected:
  MysqlTls() { env_ = "MARIADB_TLS=" + ca() + " MARIADB_TLS_REQUIRED=1"; }
  std::string ca() const { return dir_.path() + "/ca"; }
  // The user `tls` (password below, made by the test) and `query`.
  std::string url_with(const std::string& query) const {
    return url_as(std::string("tls:") + password, "dlock") + (query.empty() ? "" : "?" + query);
  }
  static constexpr const char* password = "My5ecretXy42";

  // Connecting with `query` fails with `unavailable` within op_timeout
  // (1 s), saying `named` and never the password.
  void refused(const std::string& query, const std::string& named, errc kind = errc::unavailable) {
    expect_refused_within([&] { (void)connect(url_with(query), options()); }, kind, 1s + scaled(1500ms), named,
                          password, query);
  }
  // Makes the user `tls` with `require` (e.g. "SSL", "SUBJECT '/CN=dlock'").
  void make_user(const std::string& require) {
    ASSERT_EQ(admin("CREATE USER 'tls'@'127.0.0.1' IDENTIFIED BY '" + std::string(password) + "' REQUIRE " +
                    require + "; GRANT ALL ON dlock.* TO 'tls'@'127.0.0.1';"),
              0);
  }
};

// A stopped server answers nothing: every call fails with unavailable
// within op_timeout (never a hang), and the client works again once the
// server resumes.
TEST_F(MysqlFault, StoppedServerFailsCallsWithinTheTimeout) {
  auto client = connect(url_, options());
  auto held = client->mutex("held");
  held.lock();
  ASSERT_EQ(server("pause"), 0);
  auto other = client->mutex("other");
  const auto start = steady::now();
  EXPECT_EQ(thrown([&] { (void)other.try_lock(); }), errc::unavailable);
  const auto took = steady::now() - start;
  EXPECT_LT(took, 1000ms + scaled(700ms)) << "a call outlived op_timeout";
  ASSERT_EQ(server("resume"), 0);
  ASSERT_TRUE(other.try_lock_for(scaled(5s))) << "the client did not recover after the server resumed";
  other.unlock();
  held.unlock();
}

// unlock() sends the release and returns: a stopped server does not hold it
// up, while unlock_checked() waits for the answer and fails within
// op_timeout. The release runs once the server resumes (the server reads
// what the client wrote before it gave up on the connection). `query`: the
// url's, for the mode.
void MysqlFault::unlock_does_not_wait_for_the_server(const std::string& query) {
  auto client = connect(url_ + query, options());
  auto m = client->mutex("async"), checked = client->mutex("checked");
  m.lock();
  checked.lock();
  // (Session mode: the holding connection failed, so the server freed it: lock_lost.)
  expect_unlock_does_not_wait(
      m, checked, [&] { ASSERT_EQ(server("pause"), 0); }, [&] { ASSERT_EQ(server("resume"), 0); },
      query.empty() ? std::optional(errc::unavailable) : std::optional(errc::lock_lost));
  expect_the_release_ran(*client, *connect(url_ + query, options()));
}

TEST_F(MysqlFault, UnlockDoesNotWaitForTheServer) { unlock_does_not_wait_for_the_server(""); }
TEST_F(MysqlFault, SessionUnlockDoesNotWaitForTheServer) { unlock_does_not_wait_for_the_server("?mode=session"); }

// A killed server refuses connections: unavailable at once.
TEST_F(MysqlFault, KilledServerIsUnavailable) {
  auto client = connect(url_, options());
  auto m = client->mutex("m");
  ASSERT_TRUE(m.try_lock());
  m.unlock();
  ASSERT_EQ(server("kill"), 0);
  const auto start = steady::now();
  EXPECT_EQ(thrown([&] { (void)m.try_lock(); }), errc::unavailable);
  EXPECT_LT(steady::now() - start, 1000ms + scaled(700ms));
}

// Tokens come from a durable counter: after a restart (a crash to the
// clients), a new grant's token is still greater than every earlier one.
TEST_F(MysqlFault, TokensKeepIncreasingAcrossARestart) {
  std::uint64_t before = 0;
  {
    auto client = connect(url_, options());
    for (int i = 0; i < 5; ++i) {
      auto m = client->mutex("fenced");
      m.lock();
      before = m.token();
      m.unlock();
    }
  }
  ASSERT_EQ(server("restart"), 0);
  auto client = connect(url_, options());
  auto m = client->mutex("fenced");
  ASSERT_TRUE(m.try_lock_for(scaled(5s)));
  EXPECT_GT(m.token(), before);
  m.unlock();
}

// Session mode: a restart ends every session and with them the GET_LOCKs;
// the holder learns it at its next renewal, never assumes it still holds,
// and the next holder's token is greater.
TEST_F(MysqlFault, SessionHoldersLearnARestartFreedTheirLocks) {
  auto holder_client = connect(url_ + "?mode=session", options());
  auto holder = holder_client->mutex("jobs/report", {.lease = 1500ms});
  holder.lock();
  const auto before = holder.token();
  ASSERT_EQ(server("restart"), 0);
  EXPECT_TRUE(eventually([&] { return holder.lost(); }, 4s)) << "the holder kept believing in a lock the restart freed";
  auto other = connect(url_ + "?mode=session", options())->mutex("jobs/report");
  ASSERT_TRUE(other.try_lock_for(scaled(5s)));
  EXPECT_GT(other.token(), before);
  other.unlock();
  EXPECT_EQ(holder.unlock_checked().code(), errc::lock_lost);
}

// A session waiter blocks in the server's own queue (GET_LOCK with a
// timeout) and is handed the lock by the release, with a greater token.
TEST_F(MysqlFault, SessionWaiterIsHandedTheLockByTheServer) {
  auto a = connect(url_ + "?mode=session", options());
  auto b = connect(url_ + "?mode=session", options());
  auto held = a->mutex("queue");
  held.lock();
  const auto first_token = held.token();
  auto waiter = b->mutex("queue");
  EXPECT_FALSE(waiter.try_lock_for(200ms)) << "a second session took a held lock";
  std::atomic<bool> got{false};
  std::atomic<std::uint64_t> token{0};
  std::thread wait([&] {
    got = waiter.try_lock_for(scaled(5s));
    if (got) {
      token = waiter.token();
      waiter.unlock();
    }
  });
  std::this_thread::sleep_for(300ms);  // the waiter is in GET_LOCK's queue by now
  const auto released = steady::now();
  held.unlock();
  wait.join();
  ASSERT_TRUE(got) << "the waiter never got the released lock";
  EXPECT_LT(steady::now() - released, scaled(2s)) << "the waiter was not woken by the release";
  EXPECT_GT(token.load(), first_token);
}

// A user with rights on dlock's tables only works; without the tables and
// without the right to create them, it is told what to run.
TEST_F(MysqlFault, LeastPrivilegedUserIsToldTheDdlThenWorks) {
  ASSERT_EQ(admin("CREATE DATABASE dlock_lp; USE dlock_lp; CREATE USER 'lp'@'127.0.0.1' IDENTIFIED BY 'lp'; "
                  "GRANT SELECT, INSERT, UPDATE, DELETE ON dlock_lp.* TO 'lp'@'127.0.0.1';"),
            0);
  const std::string url = url_as("lp:lp", "dlock_lp");
  std::string ddl;
  try {
    (void)connect(url, options());
    FAIL() << "connected without dlock's tables";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), errc::unavailable) << e.what();
    const std::string what = e.what();
    EXPECT_EQ(what.find(":lp@"), std::string::npos) << "the password leaked: " << what;
    const auto from = what.find("CREATE TABLE"), to = what.find(";\nthen GRANT");
    ASSERT_NE(from, std::string::npos) << what;
    ASSERT_NE(to, std::string::npos) << what;
    ddl = what.substr(from, to - from);
  }
  ASSERT_EQ(admin("USE dlock_lp; " + ddl + ";"), 0) << "the DDL in the message does not run:\n" << ddl;
  auto client = connect(url, options());
  auto m = client->mutex("orders");
  ASSERT_TRUE(m.try_lock());
  EXPECT_GT(m.token(), 0u);
  m.unlock();
}

// ssl-ca and ssl-verify-server-cert=1 with the test's CA: the client locks,
// over TLS (the server takes nothing else). TLS off, and a CA that did not
// sign the server's certificate, are refused within op_timeout with a
// message that says why and never shows the password.
TEST_F(MysqlTls, VerifiedTlsLocksAndTlsOffOrAnotherCaIsRefused) {
  make_user("NONE");
  const std::string other_ca = dir_.path() + "/other-ca";
  ASSERT_EQ(std::system((std::string(DLOCK_TEST_CA_SCRIPT) + " " + other_ca).c_str()), 0);
  {
    auto client = connect(url_with("ssl-ca=" + ca() + "/ca.pem&ssl-verify-server-cert=1"), options());
    auto m = client->mutex("jobs");
    std::lock_guard hold(m);
    EXPECT_GT(m.token(), 0u);
  }
  refused("", "requires TLS");
  refused("ssl-ca=" + other_ca + "/ca.pem&ssl-verify-server-cert=1", "TLS/SSL error");
}

// ssl-cert and ssl-key reach the client library: a user made with REQUIRE
// SUBJECT '/CN=dlock' locks with the test's client certificate. Without
// one, or with one another CA signed, the server refuses, and the message
// says what to check; a certificate or key file that isn't there is named
// before connecting.
TEST_F(MysqlTls, ClientCertificateLocksAndAMissingOrForeignOneIsRefused) {
  make_user("SUBJECT '/CN=dlock'");
  const std::string other_ca = dir_.path() + "/other-ca";
  ASSERT_EQ(std::system((std::string(DLOCK_TEST_CA_SCRIPT) + " " + other_ca).c_str()), 0);
  const std::string verified = "ssl-ca=" + ca() + "/ca.pem&ssl-verify-server-cert=1";
  const auto client_cert = [](const std::string& dir) {
    return "&ssl-cert=" + dir + "/client.pem&ssl-key=" + dir + "/client.key";
  };
  {
    auto client = connect(url_with(verified + client_cert(ca())), options());
    auto m = client->mutex("jobs");
    std::lock_guard hold(m);
    EXPECT_GT(m.token(), 0u);
  }
  refused(verified, "add ssl-cert=FILE&ssl-key=FILE");
  refused(verified + client_cert(other_ca), "refused the client certificate");
  refused(verified + "&ssl-cert=" + ca() + "/missing.pem&ssl-key=" + ca() + "/client.key",
          "ssl-cert='" + ca() + "/missing.pem' cannot be read", errc::invalid_argument);
  refused(verified + "&ssl-cert=" + ca() + "/client.pem&ssl-key=" + ca() + "/missing.key",
          "ssl-key='" + ca() + "/missing.key' cannot be read", errc::invalid_argument);
}

}  // namespace
}  // namespace dlock::test
