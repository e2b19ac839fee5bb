// URL parsing (core/url.h): the parts, what is refused, and that a password
// never shows in redacted() or in an error message.
#include "core/url.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace dlock::detail {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

Url parse_ok(std::string_view text) {
  auto url = parse_url(text);
  EXPECT_TRUE(url.ok()) << text << ": " << url.status().message();
  return url.ok() ? *url : Url{};
}

// The error for `text`; fails the test if it parsed.
Status parse_error(std::string_view text) {
  auto url = parse_url(text);
  EXPECT_FALSE(url.ok()) << text << " was accepted";
  EXPECT_EQ(url.code(), errc::invalid_argument) << text;
  return url.status();
}

TEST(Url, SchemeIsLowerCasedAndMayHavePlusDashDot) {
  EXPECT_EQ(parse_ok("FILE:///tmp/x").scheme, "file");
  EXPECT_EQ(parse_ok("redis+sentinel://h").scheme, "redis+sentinel");
  EXPECT_EQ(parse_ok("a-b.c://h").scheme, "a-b.c");
}

TEST(Url, MissingOrBadSchemeIsRefused) {
  EXPECT_THAT(parse_error("localhost:6379").message(), HasSubstr("scheme"));
  EXPECT_THAT(parse_error("://host").message(), HasSubstr("scheme"));
  EXPECT_THAT(parse_error("/tmp/locks").message(), HasSubstr("scheme"));
  EXPECT_THAT(parse_error("re_dis://host").message(), HasSubstr("scheme"));
  EXPECT_THAT(parse_error("re/dis://host").message(), HasSubstr("scheme"));
  EXPECT_THAT(parse_error("").message(), HasSubstr("empty"));
}

TEST(Url, FileUrlHasPathAndNoEndpoints) {
  Url u = parse_ok("file:///var/lib/locks");
  EXPECT_EQ(u.scheme, "file");
  EXPECT_TRUE(u.endpoints.empty());
  EXPECT_EQ(u.path, "/var/lib/locks");
  EXPECT_FALSE(u.user);
  EXPECT_FALSE(u.password);
  EXPECT_TRUE(u.query.empty());
}

TEST(Url, UserAndPasswordArePercentDecoded) {
  Url u = parse_ok("redis://al%69ce:p%40ss%3Aw%2Frd@host:6379");
  ASSERT_TRUE(u.user);
  ASSERT_TRUE(u.password);
  EXPECT_EQ(*u.user, "alice");
  EXPECT_EQ(*u.password, "p@ss:w/rd");
  ASSERT_EQ(u.endpoints.size(), 1u);
  EXPECT_EQ(u.endpoints[0].host, "host");
  EXPECT_EQ(u.endpoints[0].port, 6379);
}

TEST(Url, UserWithoutPasswordAndPasswordWithoutUser) {
  Url a = parse_ok("redis://alice@h");
  EXPECT_EQ(a.user, "alice");
  EXPECT_FALSE(a.password);
  Url b = parse_ok("redis://:secret@h");
  EXPECT_FALSE(b.user);
  EXPECT_EQ(b.password, "secret");
  Url c = parse_ok("redis://alice:@h");
  EXPECT_EQ(c.user, "alice");
  EXPECT_EQ(c.password, "");
}

TEST(Url, AtSignInPasswordSplitsAtTheLastAt) {
  Url u = parse_ok("redis://u:p@ss@host");
  EXPECT_EQ(u.user, "u");
  EXPECT_EQ(u.password, "p@ss");
  ASSERT_EQ(u.endpoints.size(), 1u);
  EXPECT_EQ(u.endpoints[0].host, "host");
}

TEST(Url, SeveralHostsKeepTheirOrderAndPorts) {
  Url u = parse_ok("zk://a:2181,b:2182,c/chroot");
  ASSERT_EQ(u.endpoints.size(), 3u);
  EXPECT_EQ(u.endpoints[0].host, "a");
  EXPECT_EQ(u.endpoints[0].port, 2181);
  EXPECT_EQ(u.endpoints[1].host, "b");
  EXPECT_EQ(u.endpoints[1].port, 2182);
  EXPECT_EQ(u.endpoints[2].host, "c");
  EXPECT_FALSE(u.endpoints[2].port);
  EXPECT_EQ(u.path, "/chroot");
}

TEST(Url, Ipv6InBrackets) {
  Url u = parse_ok("etcd://[::1]:2379,[fe80::1%25eth0],10.0.0.1:2380");
  ASSERT_EQ(u.endpoints.size(), 3u);
  EXPECT_EQ(u.endpoints[0].host, "::1");
  EXPECT_EQ(u.endpoints[0].port, 2379);
  EXPECT_EQ(u.endpoints[1].host, "fe80::1%25eth0");
  EXPECT_FALSE(u.endpoints[1].port);
  EXPECT_EQ(u.endpoints[2].host, "10.0.0.1");
  EXPECT_EQ(u.endpoints[2].port, 2380);
  EXPECT_THAT(u.redacted(), HasSubstr("[::1]:2379"));
}

TEST(Url, MalformedIpv6IsRefused) {
  EXPECT_THAT(parse_error("redis://[::1").message(), HasSubstr("]"));
  EXPECT_THAT(parse_error("redis://::1").message(), HasSubstr("brackets"));
  EXPECT_THAT(parse_error("redis://::1:6379").message(), HasSubstr("brackets"));
  EXPECT_THAT(parse_error("redis://[]:6379").message(), HasSubstr("IPv6"));
  EXPECT_THAT(parse_error("redis://[::1]x").message(), HasSubstr("]"));
  EXPECT_THAT(parse_error("redis://[::1]:").message(), HasSubstr("port"));
}

TEST(Url, PortsInRangeAreAccepted) {
  EXPECT_EQ(parse_ok("redis://h:1").endpoints.at(0).port, 1);
  EXPECT_EQ(parse_ok("redis://h:65535").endpoints.at(0).port, 65535);
}

TEST(Url, PortsOutOfRangeOrNotNumbersAreRefused) {
  for (const char* text : {"redis://h:0", "redis://h:65536", "redis://h:99999999999", "redis://h:abc",
                           "redis://h:-1", "redis://h:+1", "redis://h:63_79", "redis://h:6379x",
                           "redis://h:", "redis://[::1]:0", "redis://[::1]:65536", "redis://a:1,b:70000"}) {
    Status s = parse_error(text);
    EXPECT_THAT(s.message(), HasSubstr("port")) << text;
  }
  // The message names the range for an out-of-range number.
  EXPECT_THAT(parse_error("redis://h:65536").message(), HasSubstr("65535"));
}

TEST(Url, EmptyHostsAreRefused) {
  EXPECT_THAT(parse_error("redis://a,,b").message(), HasSubstr("empty host"));
  EXPECT_THAT(parse_error("redis://,a").message(), HasSubstr("empty host"));
  EXPECT_THAT(parse_error("redis://a,").message(), HasSubstr("trailing ','"));
  EXPECT_THAT(parse_error("redis://a:1,").message(), HasSubstr("trailing ','"));
  EXPECT_THAT(parse_error("redis://:6379").message(), HasSubstr("host"));
  EXPECT_THAT(parse_error("redis://u:p@:6379").message(), HasSubstr("host"));
}

TEST(Url, QueryIsParsedAndDecoded) {
  Url u = parse_ok("redis://h/0?db=1&name=a%20b&k%26y=v%3Dw&flag&&empty=");
  EXPECT_EQ(u.path, "/0");
  ASSERT_EQ(u.query.size(), 5u);
  EXPECT_EQ(u.query.at("db"), "1");
  EXPECT_EQ(u.query.at("name"), "a b");
  EXPECT_EQ(u.query.at("k&y"), "v=w");
  EXPECT_EQ(u.query.at("flag"), "");
  EXPECT_EQ(u.query.at("empty"), "");
}

TEST(Url, QueryWithoutPathOrHost) {
  Url u = parse_ok("file:///tmp/x?fsync=true");
  EXPECT_EQ(u.path, "/tmp/x");
  EXPECT_EQ(u.query.at("fsync"), "true");
  Url v = parse_ok("redis://h?db=2");
  EXPECT_EQ(v.path, "");
  ASSERT_EQ(v.endpoints.size(), 1u);
  EXPECT_EQ(v.endpoints[0].host, "h");
  EXPECT_EQ(v.query.at("db"), "2");
}

TEST(Url, DuplicateQueryParametersAreRefused) {
  EXPECT_THAT(parse_error("redis://h?db=1&db=2").message(), HasSubstr("'db' given twice"));
  EXPECT_THAT(parse_error("redis://h?db=1&db=1").message(), HasSubstr("twice"));
  // Equal after decoding counts as the same key.
  EXPECT_THAT(parse_error("redis://h?db=1&%64b=2").message(), HasSubstr("twice"));
}

TEST(Url, QueryParameterWithoutNameIsRefused) {
  EXPECT_THAT(parse_error("redis://h?=1").message(), HasSubstr("query"));
}

TEST(Url, PathIsPercentDecoded) {
  EXPECT_EQ(parse_ok("file:///tmp/a%20b/%C3%A9").path, "/tmp/a b/\xC3\xA9");
  EXPECT_EQ(parse_ok("file:///tmp/a%2fb").path, "/tmp/a/b");
}

TEST(Url, BadPercentEscapesAreRefusedNamingThePart) {
  EXPECT_THAT(parse_error("file:///tmp/a%2").message(), HasSubstr("path"));
  EXPECT_THAT(parse_error("file:///tmp/a%").message(), HasSubstr("path"));
  EXPECT_THAT(parse_error("file:///tmp/a%zz").message(), HasSubstr("path"));
  EXPECT_THAT(parse_error("redis://h?a=%g1").message(), HasSubstr("query"));
  EXPECT_THAT(parse_error("redis://h?a%=1").message(), HasSubstr("query"));
  EXPECT_THAT(parse_error("redis://us%er@h").message(), HasSubstr("user name"));
  EXPECT_THAT(parse_error("redis://u:pa%xss@h").message(), HasSubstr("password"));
}

TEST(Url, ControlCharactersAndSpacesAreRefused) {
  for (std::string text : {std::string("file:///tmp/a\nb"), std::string("file:///tmp/a\tb"),
                           std::string("file:///tmp/a b"), std::string("file:///tmp/a\x7f"),
                           std::string("redis://h\r"), std::string("file:///tmp/a\0b", 15),
                           std::string("redis://u:pa\x01ss@h")}) {
    Status s = parse_error(text);
    EXPECT_THAT(s.message(), HasSubstr("control character")) << text;
  }
}

TEST(Url, RedactedHidesThePassword) {
  Url u = parse_ok("redis://alice:hunter2@h1:6379,[::1]:6380/0?db=3");
  std::string r = u.redacted();
  EXPECT_THAT(r, Not(HasSubstr("hunter2")));
  EXPECT_EQ(r, "redis://alice:***@h1:6379,[::1]:6380/0?db=3");
  EXPECT_EQ(parse_ok("redis://:hunter2@h").redacted(), "redis://:***@h");
  EXPECT_EQ(parse_ok("redis://alice@h").redacted(), "redis://alice@h");
  EXPECT_EQ(parse_ok("file:///tmp/x").redacted(), "file:///tmp/x");
}

TEST(Url, RedactedHidesSecretQueryParameters) {
  Url u = parse_ok(
      "postgres://h/db?password=hunter2&sslpassword=hunter3&auth_token=hunter4&client_secret=hunter5&"
      "passwd=hunter6&user=bob");
  std::string r = u.redacted();
  for (const char* secret : {"hunter2", "hunter3", "hunter4", "hunter5", "hunter6"})
    EXPECT_THAT(r, Not(HasSubstr(secret))) << r;
  EXPECT_THAT(r, HasSubstr("password=***"));
  EXPECT_THAT(r, HasSubstr("user=bob"));
  // Encoded keys are judged after decoding.
  EXPECT_THAT(parse_ok("redis://h?pass%77ord=hunter2").redacted(), Not(HasSubstr("hunter2")));
}

// Secret query keys are hidden whatever their case.
TEST(Url, RedactedHidesSecretQueryParametersWhateverTheirCase) {
  for (const char* text : {"postgres://h/db?Password=hunter2", "postgres://h/db?PASSWORD=hunter2",
                           "redis://h?Auth_Token=hunter2"})
    EXPECT_THAT(parse_ok(text).redacted(), Not(HasSubstr("hunter2"))) << text;
}

// Found by fuzz_url: decoded parts were shown raw, so the redacted form of
// a valid URL could be refused (a query key starting with '@') or name
// another store ('&' or '=' in a value). Now it parses back to the same parts.
TEST(Url, RedactedFormParsesBackToTheSameParts) {
  for (const char* text : {"zk://db?%40x=1&lmodsy", "redis://h/0?prefix=a%26b%3Dc&p%25=%20",
                           "redis://al%40ice%3Ax:pw@h/p%3Fq%40r", "file:///tmp/caf\xc3\xa9"}) {
    SCOPED_TRACE(text);
    Url u = parse_ok(text);
    Url again = parse_ok(u.redacted());
    EXPECT_EQ(again.user, u.user);
    EXPECT_EQ(again.path, u.path);
    EXPECT_EQ(again.query, u.query);
    ASSERT_EQ(again.endpoints.size(), u.endpoints.size());
  }
  EXPECT_EQ(parse_ok("redis://h/0?prefix=a%26b").redacted(), "redis://h/0?prefix=a%26b");
  EXPECT_EQ(parse_ok("file:///tmp/caf\xc3\xa9").redacted(), "file:///tmp/caf\xc3\xa9");  // UTF-8 stays readable
}

// Found by fuzz_url: "[[x]" was taken as a host "[x", shown without its
// brackets, and that form could not be read back.
TEST(Url, OnlyAnIpv6AddressGoesInBrackets) {
  for (const char* text : {"zk://[[b1]:218/x", "redis://[localhost]:6379", "redis://[12]:1", "redis://[::1%[x]:1"})
    EXPECT_EQ(parse_url(text).status().code(), errc::invalid_argument) << text;
  EXPECT_THAT(parse_url("redis://[localhost]:6379").status().message(), HasSubstr("only an IPv6 address"));
  EXPECT_EQ(parse_ok("redis://[fe80::1%eth0]:6379").endpoints.at(0).host, "fe80::1%eth0");
  EXPECT_EQ(parse_ok("redis://[::ffff:127.0.0.1]:1").redacted(), "redis://[::ffff:127.0.0.1]:1");
}

TEST(Url, ErrorsNeverContainThePassword) {
  // Each of these has a well-formed password and a mistake elsewhere.
  for (const char* text : {
           "redis://u:hunter2@h:0", "redis://u:hunter2@h:65536", "redis://u:hunter2@h:port",
           "redis://u:hunter2@a,,b", "redis://u:hunter2@a,", "redis://u:hunter2@[::1",
           "redis://u:hunter2@::1", "redis://u:hunter2@h?a=1&a=2", "redis://u:hunter2@h/%zz",
           "redis://u:hunter2@h?=x", "redis://u:hunter2@h/ x", "redis://u:hunter2%@h",
           "redis://u:hunter2%4@h", "redis://u:%68unter2%zz@h", "re_dis://u:hunter2@h",
       }) {
    auto url = parse_url(text);
    ASSERT_FALSE(url.ok()) << text;
    EXPECT_THAT(url.status().message(), Not(HasSubstr("hunter2"))) << text;
    EXPECT_THAT(url.status().message(), Not(HasSubstr("hunter"))) << text;
  }
}

// A raw '/' or '?' in a password ends the authority early; such a URL is
// refused without any part of the password in the message.
TEST(Url, UnescapedSlashOrQuestionMarkInPasswordNeverLeaks) {
  for (const char* text : {"redis://u:12345/hunter2@h:6379", "redis://u:hunter2/x@h:6379",
                           "redis://u:hunter2?x@h:6379", "redis://u:hun/ter2@h:6379"}) {
    auto url = parse_url(text);
    if (url.ok()) {
      EXPECT_THAT(url->redacted(), Not(HasSubstr("hunter2"))) << text;
      EXPECT_THAT(url->redacted(), Not(HasSubstr("ter2"))) << text;
      EXPECT_THAT(url->redacted(), Not(HasSubstr("12345"))) << text;
    } else {
      EXPECT_THAT(url.status().message(), Not(HasSubstr("hun"))) << text;
      EXPECT_THAT(url.status().message(), Not(HasSubstr("12345"))) << text;
    }
  }
}

}  // namespace
}  // namespace dlock::detail

namespace dlock::detail {
namespace {

// A URL that does not parse is still printed without its secrets: what
// stands between "user:" and "@", and secret-looking query values.
TEST(PrintableUrl, HidesSecretsWhetherTheUrlParsesOrNot) {
  EXPECT_EQ(printable_url("redis://u:Zq9Secret77@h:6379/0"), "redis://u:***@h:6379/0");
  // Bad port: does not parse.
  EXPECT_EQ(printable_url("redis://u:Zq9Secret77@h:99999/0"), "redis://u:***@h:99999/0");
  EXPECT_EQ(printable_url("redis://u:Zq9:Sec@ret77@h:port"), "redis://u:***@h:port");
  // A raw '/', '?' or '#' in the password: why the URL does not parse.
  EXPECT_EQ(printable_url("redis://u:Zq9/Secret77@h/0"), "redis://u:***@h/0");
  EXPECT_EQ(printable_url("redis://u:Zq9?Secret77@h"), "redis://u:***@h");
  EXPECT_EQ(printable_url("redis://u:Zq9#Secret77@h"), "redis://u:***@h");
  EXPECT_EQ(printable_url("etcds://h:x?ca=/c.pem&key=/k.pem&password=Zq9Secret77"),
            "etcds://h:x?ca=/c.pem&key=***&password=***");
  for (const char* text : {"redis://u:Zq9Secret77@h:99999", "mysql://:Zq9Secret77@[::1/db", "u:Zq9Secret77@x y",
                           "zk://a:Zq9Secret77@h/b c?password=Zq9Secret77"})
    EXPECT_THAT(printable_url(text), Not(HasSubstr("Zq9Secret77"))) << text;
  // Nothing secret: as given.
  EXPECT_EQ(printable_url("redis://h:99999"), "redis://h:99999");
}

}  // namespace
}  // namespace dlock::detail
