// The redis:// URLs (redis://, redis+unix://, redis+sentinel://,
// redis+cluster://): what each option sets (backends/redis/config.h), what
// is refused with a message naming the problem before any connection, and
// that no message or redacted URL shows the password.
#include "backends/redis/config.h"
#include "core/url.h"

#include "unit_support.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dlock {
namespace {

using namespace std::chrono_literals;
using detail::redis::Config;
using test::refused;
using ::testing::HasSubstr;
using ::testing::Not;

Config parsed(const std::string& text, ClientOptions options = {}) {
  auto url = detail::parse_url(text);
  EXPECT_TRUE(url) << text << ": " << url.status().message();
  auto config = detail::redis::parse_config(*url, options);
  EXPECT_TRUE(config) << text << ": " << config.status().message();
  return config ? *config : Config{};
}

TEST(RedisUrl, ReadsHostPortDbAndDefaults) {
  Config c = parsed("redis://10.1.2.3");
  EXPECT_EQ(c.host, "10.1.2.3");
  EXPECT_EQ(c.port, 6379);
  EXPECT_EQ(c.db, 0);
  EXPECT_EQ(c.prefix, "dlock:");
  EXPECT_EQ(c.connections, 2);
  EXPECT_EQ(c.waiter_ttl, 2s);
  EXPECT_EQ(c.wait_replicas, 0);
  EXPECT_FALSE(c.unix_socket);

  c = parsed("redis://u:pw@[::1]:6380/7", {.op_timeout = 3s});
  EXPECT_EQ(c.host, "::1");
  EXPECT_EQ(c.port, 6380);
  EXPECT_EQ(c.db, 7);
  EXPECT_EQ(c.user, "u");
  EXPECT_EQ(c.password, "pw");
  EXPECT_EQ(c.op_timeout, 3s);
  EXPECT_EQ(c.connect_timeout, 3s);  // op_timeout unless connect_timeout says otherwise
}

TEST(RedisUrl, ReadsEveryOption) {
  Config c = parsed(
      "redis://h/1?prefix=app:locks:&connections=5&connect_timeout=250ms&waiter_ttl=3s&token_retention=0"
      "&wait_replicas=2&wait_timeout=100ms");
  EXPECT_EQ(c.prefix, "app:locks:");
  EXPECT_EQ(c.connections, 5);
  EXPECT_EQ(c.connect_timeout, 250ms);
  EXPECT_EQ(c.waiter_ttl, 3s);
  EXPECT_EQ(c.token_retention, 0ms);
  EXPECT_EQ(c.wait_replicas, 2);
  EXPECT_EQ(c.wait_timeout, 100ms);
}

TEST(RedisUrl, ReadsUnixSentinelAndClusterForms) {
  Config unix_socket = parsed("redis+unix:///run/redis/redis.sock?db=3");
  EXPECT_TRUE(unix_socket.unix_socket);
  EXPECT_EQ(unix_socket.socket_path, "/run/redis/redis.sock");
  EXPECT_EQ(unix_socket.db, 3);

  Config sentinel = parsed("redis+sentinel://s1,s2:26380/mymaster?db=2");
  EXPECT_EQ(sentinel.master_name, "mymaster");
  ASSERT_EQ(sentinel.sentinels.size(), 2u);
  EXPECT_EQ(sentinel.sentinels[0].host, "s1");
  EXPECT_EQ(sentinel.sentinels[0].port, 26379);  // the sentinels' default port
  EXPECT_EQ(sentinel.sentinels[1].port, 26380);
  EXPECT_EQ(sentinel.db, 2);

  Config cluster = parsed("redis+cluster://n1,n2:7001");
  ASSERT_EQ(cluster.seeds.size(), 2u);
  EXPECT_EQ(cluster.seeds[0].port, 6379);
  EXPECT_EQ(cluster.seeds[1].port, 7001);
}

TEST(RedisUrl, RefusesBadValuesNamingThem) {
  EXPECT_THAT(refused("redis://h?prefix="), HasSubstr("prefix must not be empty"));
  EXPECT_THAT(refused("redis://h?prefix=a{b"), HasSubstr("must not contain '{' or '}'"));
  EXPECT_THAT(refused("redis://h?connections=0"), HasSubstr("connections '0' must be a whole number from 1 to 64"));
  EXPECT_THAT(refused("redis://h?waiter_ttl=10ms"), HasSubstr("waiter_ttl '10ms' must be from 1s to 1h"));
  EXPECT_THAT(refused("redis://h?wait_replicas=101"), HasSubstr("wait_replicas"));
  EXPECT_THAT(refused("redis://h?wait_timeout=1s"), HasSubstr("set wait_replicas=N too"));
  EXPECT_THAT(refused("redis://h?frobnicate=1"), HasSubstr("unknown option 'frobnicate'"));
  EXPECT_THAT(refused("redis://h/x"), HasSubstr("db (the path)"));
  EXPECT_THAT(refused("redis://a,b"), HasSubstr("takes one host"));
  EXPECT_THAT(refused("redis://u@h"), HasSubstr("a user name needs a password"));
  EXPECT_THAT(refused("redis+unix://h/run/redis.sock"), HasSubstr("takes no host"));
  EXPECT_THAT(refused("redis+sentinel://s1,s1/m"), HasSubstr("listed twice"));
  EXPECT_THAT(refused("redis+sentinel://s1"), HasSubstr("needs the master name"));
  EXPECT_THAT(refused("redis+cluster://n1?db=1"), HasSubstr("takes no db"));
  EXPECT_THAT(refused("redis+cluster://n1?wait_replicas=1"), HasSubstr("not available on redis+cluster"));
}

TEST(RedisUrl, NeverShowsThePassword) {
  for (const std::string url : {"redis://u:Zq9Secret77@h?connections=99", "redis://:Zq9Secret77@h/nodb",
                                "redis+sentinel://u:Zq9Secret77@s1,s1/m", "redis+cluster://u:Zq9Secret77@n?db=1"})
    EXPECT_THAT(refused(url), Not(HasSubstr("Zq9Secret77"))) << url;
  const Config c = parsed("redis://u:Zq9Secret77@h");
  EXPECT_THAT(c.redacted_url, Not(HasSubstr("Zq9Secret77")));
  EXPECT_THAT(c.redacted_url, HasSubstr("u:***@h"));
}

}  // namespace
}  // namespace dlock
