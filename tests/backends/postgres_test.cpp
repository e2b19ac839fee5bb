// The postgres:// backend's own behaviour, no fault injected: the rights a
// database user needs, names that differ are different locks in both modes,
// and TLS with a CA the test makes (libpq's sslmode, sslrootcert, sslcert
// and sslkey passed through). Each test starts its own server
// (scripts/postgres-server.sh) in a temp dir, because it sets up users,
// schemas or TLS.
#include "child_process.h"
#include "postgres_server.h"
#include "thrown.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <utility>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;

// (The suite keeps the name it had in tests/fault/postgres_fault_test.cpp:
// CTest's test names use it.)
using PostgresFault = OwnPostgresServer;

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
