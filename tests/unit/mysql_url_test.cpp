// The mysql:// URL checks: refused with invalid_argument and a message
// naming the problem, before any connection is attempted; an unreachable
// server is unavailable within op_timeout. No server runs here.
#include <dlock/dlock.h>

#include "backends/mysql/config.h"
#include "core/url.h"

#include "unit_support.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::refused;
using test::thrown_code;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(MysqlUrl, RefusesMissingHostOrDatabase) {
  EXPECT_THAT(refused("mysql://u@/db"), HasSubstr("needs a host"));
  EXPECT_THAT(refused("mysql://u@127.0.0.1:1"), HasSubstr("database name as its path"));
  EXPECT_THAT(refused("mysql://u@127.0.0.1:1/"), HasSubstr("database name as its path"));
  EXPECT_THAT(refused("mysql://u@127.0.0.1:1/a/b"), HasSubstr("database name as its path"));
  EXPECT_THAT(refused("mysql://u@127.0.0.1:1,127.0.0.1:2/db"), HasSubstr("one host"));
}

TEST(MysqlUrl, RefusesDatabaseNamesItCannotQuote) {
  EXPECT_THAT(refused("mysql://u@127.0.0.1:1/a%60b"), HasSubstr("database 'a`b'"));
  EXPECT_THAT(refused("mysql://u@127.0.0.1:1/a%20b"), HasSubstr("letters, digits"));
  EXPECT_THAT(refused("mysql://u@127.0.0.1:1/" + std::string(65, 'd')), HasSubstr("1 to 64"));
}

TEST(MysqlUrl, RefusesBadOptions) {
  EXPECT_THAT(refused("mysql://u@127.0.0.1:1/db?pool=0"), HasSubstr("pool"));
  EXPECT_THAT(refused("mysql://u@127.0.0.1:1/db?pool=65"), HasSubstr("pool"));
  EXPECT_THAT(refused("mysql://u@127.0.0.1:1/db?waiter_ttl=10ms"), HasSubstr("waiter_ttl"));
  EXPECT_THAT(refused("mysql://u@127.0.0.1:1/db?mode=advisory"), HasSubstr("mode 'advisory'"));
  EXPECT_THAT(refused("mysql://u@127.0.0.1:1/db?ssl=yes"), HasSubstr("ssl 'yes' must be 0 or 1"));
  EXPECT_THAT(refused("mysql://u@127.0.0.1:1/db?ssl-ca="), HasSubstr("ssl-ca needs a value"));
  EXPECT_THAT(refused("mysql://u@127.0.0.1:1/db?sslmode=require"), HasSubstr("unknown option 'sslmode'"));
}

// The server's lock names are dlock/<database>/<id>, at most 64 characters.
TEST(MysqlUrl, SessionModeNeedsADatabaseNameThatFitsALockName) {
  EXPECT_THAT(refused("mysql://u@127.0.0.1:1/" + std::string(38, 'd') + "?mode=session"),
              HasSubstr("at most 37 characters"));
  EXPECT_THAT(refused("mysql://u@127.0.0.1:1/" + std::string(37, 'd') + "?mode=session", errc::unavailable),
              HasSubstr("127.0.0.1:1"));
}

// What the client library is told of verifying the server: "" if nothing.
std::string verify_of(const std::string& text) {
  auto url = detail::parse_url(text);
  EXPECT_TRUE(url) << text;
  auto config = detail::mysql::parse_config(*url, {});
  EXPECT_TRUE(config) << text << ": " << config.status().message();
  if (!config) return "";
  std::string verify;
  for (const auto& [key, value] : config->connect.tls)
    if (key == "ssl-verify-server-cert") verify = value;
  return verify;
}

// TLS asked for is TLS verified, server name included, unless the URL says
// not to: the client library alone would encrypt and check nothing.
TEST(MysqlUrl, TlsVerifiesTheServerUnlessTurnedOff) {
  EXPECT_EQ(verify_of("mysql://u@h/db?ssl=1"), "1");
  EXPECT_EQ(verify_of("mysql://u@h/db?ssl-ca=/etc/hostname"), "1");
  EXPECT_EQ(verify_of("mysql://u@h/db?ssl=1&ssl-verify-server-cert=0"), "0");
  EXPECT_EQ(verify_of("mysql://u@h/db?ssl=0"), "");
  EXPECT_EQ(verify_of("mysql://u@h/db"), "");
}

TEST(MysqlUrl, NeverEchoesThePassword) {
  test::never_echoes_the_password("mysql://alice:s3cret@127.0.0.1:1/db?pool=0", "mysql://alice:s3cret@127.0.0.1:1/db");
}

// A server that accepts the connection and never answers (a stopped one,
// as the kernel completes the handshake for it): unavailable within the
// timeout, never a hang.
TEST(MysqlUrl, SilentServerFailsWithinTheTimeout) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 8), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string url = "mysql://u:p@127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/db";

  const auto start = std::chrono::steady_clock::now();
  std::string message;
  EXPECT_EQ(thrown_code([&] { (void)connect(url, {.op_timeout = 400ms}); }, &message), errc::unavailable);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 350ms);
  EXPECT_LT(took, test::scaled(1500ms));
  EXPECT_THAT(message, HasSubstr("op_timeout"));
  ::close(listener);
}

TEST(MysqlUrl, UnreachableServerFailsWithinTheTimeout) {
  const std::string message = test::unavailable_within("mysql://u@127.0.0.1:1/db", 200ms, 1500ms);
  EXPECT_THAT(message, HasSubstr("127.0.0.1:1"));
}

}  // namespace
}  // namespace dlock
