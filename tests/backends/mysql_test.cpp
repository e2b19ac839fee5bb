// The mysql:// backend's own behaviour, no fault injected: a session-mode
// waiter handed the lock by the server, users with too few rights told the
// DDL, and TLS with a CA the test makes (Connector/C's ssl-ca,
// ssl-verify-server-cert, ssl-cert and ssl-key passed through). Each test
// starts its own MariaDB server (scripts/mariadb-server.sh) in a temp dir,
// because it administers it.
#include "child_process.h"
#include "mariadb_server.h"
#include "thrown.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// (The suite keeps the name it had in tests/fault/mysql_fault_test.cpp:
// CTest's test names use it.)
using MysqlFault = OwnMariadbServer;

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
