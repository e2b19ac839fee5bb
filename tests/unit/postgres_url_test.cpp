// The postgres:// URL checks: refused with a message naming the problem,
// before any connection is attempted (no server is running), and an
// unreachable server answered within the timeout, password never echoed.
#include <dlock/dlock.h>

#include "backends/postgres/config.h"
#include "core/url.h"

#include "unit_support.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dlock {
namespace {

using test::refused;
using test::thrown_code;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(PostgresUrl, NeedsAHostAndADatabase) {
  EXPECT_THAT(refused("postgres:///dlock"), HasSubstr("needs a host"));
  EXPECT_THAT(refused("postgres://127.0.0.1:1"), HasSubstr("database name"));
  EXPECT_THAT(refused("postgres://127.0.0.1:1/a/b"), HasSubstr("database name"));
}

TEST(PostgresUrl, RefusesUnknownOptionsAndValuesOutOfRange) {
  EXPECT_THAT(refused("postgres://127.0.0.1:1/db?poool=2"), HasSubstr("unknown option 'poool'"));
  EXPECT_THAT(refused("postgres://127.0.0.1:1/db?pool=0"), HasSubstr("pool '0' must be a whole number from 1 to 64"));
  EXPECT_THAT(refused("postgres://127.0.0.1:1/db?waiter_ttl=10ms"), HasSubstr("waiter_ttl '10ms' must be from 1"));
  EXPECT_THAT(refused("postgres://127.0.0.1:1/db?mode=advisory"), HasSubstr("mode 'advisory' must be table or session"));
}

// TLS files are checked before connecting (libpq would go on without a
// client certificate it cannot find); libpq's own words pass through.
TEST(PostgresUrl, TlsFilesMustBeReadable) {
  EXPECT_THAT(refused("postgres://127.0.0.1:1/db?sslcert="), HasSubstr("sslcert needs a value"));
  EXPECT_THAT(refused("postgres://127.0.0.1:1/db?sslcrl=/nonexistent/crl.pem"),
              HasSubstr("sslcrl='/nonexistent/crl.pem' cannot be read: No such file or directory"));
  // Past the checks: the unreachable server is what fails.
  EXPECT_THAT(refused("postgres://127.0.0.1:1/db?sslrootcert=system&sslmode=require", errc::unavailable),
              Not(HasSubstr("cannot be read")));
  EXPECT_THAT(refused("postgres://127.0.0.1:1/db?sslkey=pkcs11:token&sslmode=require", errc::unavailable),
              Not(HasSubstr("cannot be read")));
}

// What libpq is given for sslmode: "" if none.
std::string sslmode_of(const std::string& text) {
  auto url = detail::parse_url(text);
  EXPECT_TRUE(url) << text;
  auto config = detail::postgres::parse_config(*url, {});
  EXPECT_TRUE(config) << text << ": " << config.status().message();
  if (!config) return "";
  std::string mode;
  for (const auto& [key, value] : config->connect.params)
    if (key == "sslmode") mode = value;
  return mode;
}

// A TLS file without sslmode is TLS verified, server name included; libpq's
// own default (prefer) would take an unverified or even unencrypted
// connection without a word.
TEST(PostgresUrl, TlsFilesWithoutSslmodeMeanVerifyFull) {
  EXPECT_EQ(sslmode_of("postgres://u@h/db?sslrootcert=system"), "verify-full");
  EXPECT_EQ(sslmode_of("postgres://u@h/db?sslrootcert=/etc/hostname"), "verify-full");
  EXPECT_EQ(sslmode_of("postgres://u@h/db?sslcrl=/etc/hostname"), "verify-full");
  EXPECT_EQ(sslmode_of("postgres://u@h/db?sslmode=require&sslrootcert=/etc/hostname"), "require");
  EXPECT_EQ(sslmode_of("postgres://u@h/db"), "");
}

TEST(PostgresUrl, SchemaMustBeAPlainIdentifier) {
  EXPECT_THAT(refused("postgres://127.0.0.1:1/db?schema=Locks"), HasSubstr("schema 'Locks'"));
  EXPECT_THAT(refused("postgres://127.0.0.1:1/db?schema=a;drop"), HasSubstr("schema"));
  EXPECT_THAT(refused("postgres://127.0.0.1:1/db?schema=1st"), HasSubstr("not starting with a digit"));
  EXPECT_THAT(refused("postgres://127.0.0.1:1/db?schema=" + std::string(64, 'a')), HasSubstr("1 to 63"));
}

TEST(PostgresUrl, NeverEchoesThePassword) {
  test::never_echoes_the_password("postgres://alice:s3cret@127.0.0.1:1/db?pool=0",
                                  "postgres://alice:s3cret@127.0.0.1:1/db");
}

TEST(PostgresUrl, UnreachableServerFailsWithinTheTimeout) {
  (void)test::unavailable_within("postgres://127.0.0.1:1/db", std::chrono::milliseconds(500),
                                 std::chrono::milliseconds(1500));
}

}  // namespace
}  // namespace dlock
