// The postgres:// URL checks: refused with a message naming the problem,
// before any connection is attempted (no server is running), and an
// unreachable server answered within the timeout, password never echoed.
#include <dlock/dlock.h>

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

TEST(PostgresUrl, SchemaMustBeAPlainIdentifier) {
  EXPECT_THAT(refused("postgres://127.0.0.1:1/db?schema=Locks"), HasSubstr("schema 'Locks'"));
  EXPECT_THAT(refused("postgres://127.0.0.1:1/db?schema=a;drop"), HasSubstr("schema"));
  EXPECT_THAT(refused("postgres://127.0.0.1:1/db?schema=1st"), HasSubstr("not starting with a digit"));
  EXPECT_THAT(refused("postgres://127.0.0.1:1/db?schema=" + std::string(64, 'a')), HasSubstr("1 to 63"));
}

TEST(PostgresUrl, NeverEchoesThePassword) {
  EXPECT_THAT(refused("postgres://alice:s3cret@127.0.0.1:1/db?pool=0"), Not(HasSubstr("s3cret")));
  std::string message;
  EXPECT_EQ(thrown_code([&] { (void)connect("postgres://alice:s3cret@127.0.0.1:1/db", {.op_timeout = std::chrono::milliseconds(300)}); },
                        &message),
            errc::unavailable);
  EXPECT_THAT(message, Not(HasSubstr("s3cret")));
  EXPECT_THAT(message, HasSubstr("***"));
}

TEST(PostgresUrl, UnreachableServerFailsWithinTheTimeout) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(thrown_code([&] { (void)connect("postgres://127.0.0.1:1/db", {.op_timeout = std::chrono::milliseconds(500)}); }),
            errc::unavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - start, test::scaled(std::chrono::milliseconds(1500)));
}

}  // namespace
}  // namespace dlock
