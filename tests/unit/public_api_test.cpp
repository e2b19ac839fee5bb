// Bad input through the public API is refused with invalid_argument, a
// message naming the part, and changes nothing.
#include <dlock/dlock.h>

#include "unit_support.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

namespace dlock {
namespace {

using namespace std::chrono_literals;
using test::TempDir;
using test::thrown_code;
using ::testing::HasSubstr;
using ::testing::Not;

// connect(url) must throw invalid_argument with a message containing `part`.
void expect_connect_refused(const std::string& url, const std::string& part, ClientOptions options = {}) {
  std::string message;
  EXPECT_EQ(thrown_code([&] { (void)connect(url, options); }, &message), errc::invalid_argument) << url;
  EXPECT_THAT(message, HasSubstr(part)) << url;
  auto checked = connect_checked(url, options);
  EXPECT_FALSE(checked.ok()) << url;
  EXPECT_EQ(checked.code(), errc::invalid_argument) << url;
  EXPECT_THAT(message, ::testing::StartsWith(checked.status().message())) << url;
}

TEST(Connect, BackendsListsTheFileBackend) {
  auto names = backends();
  EXPECT_NE(std::find(names.begin(), names.end(), "file"), names.end());
}

TEST(Connect, MalformedUrlsAreRefusedNamingThePart) {
  expect_connect_refused("", "empty");
  expect_connect_refused("/tmp/locks", "scheme");
  expect_connect_refused("file:/tmp/locks", "scheme");
  expect_connect_refused("file:///tmp/a%zz", "path");
  expect_connect_refused("file:///tmp/a\nb", "control character");
  expect_connect_refused("redis://h:0", "port");
  expect_connect_refused("redis://h:65536", "port");
  expect_connect_refused("redis://h:x", "port");
  expect_connect_refused("redis://a,,b", "empty host");
  expect_connect_refused("redis://a,", "trailing");
  expect_connect_refused("redis://[::1", "]");
  expect_connect_refused("redis://h?a=1&a=2", "twice");
}

TEST(Connect, UnknownSchemeIsRefusedAndNamesTheSchemesOfThisBuild) {
  std::string message;
  EXPECT_EQ(thrown_code([&] { (void)connect("nosuchstore://h:1"); }, &message), errc::invalid_argument);
  EXPECT_THAT(message, HasSubstr("nosuchstore"));
  EXPECT_THAT(message, HasSubstr("file"));
  // Scheme matching is case-insensitive, so FILE:// is the file backend.
  TempDir dir;
  EXPECT_EQ(connect("FILE://" + dir.path().string())->scheme(), "file");
}

TEST(Connect, ErrorsNeverContainThePassword) {
  for (const char* url : {"nosuchstore://u:hunter2@h:1", "redis://u:hunter2@h:0", "redis://u:hunter2@a,,b",
                          "file://u:hunter2@localhost/tmp/x", "file://u:hunter2@/tmp/x"}) {
    auto r = connect_checked(url);
    ASSERT_FALSE(r.ok()) << url;
    EXPECT_THAT(r.status().message(), Not(HasSubstr("hunter2"))) << url;
  }
}

TEST(Connect, BadClientOptionsAreRefusedBeforeAnyIo) {
  TempDir parent;
  const auto dir = parent.path() / "locks";
  expect_connect_refused("file://" + dir.string(), "op_timeout", ClientOptions{.op_timeout = 0ms});
  expect_connect_refused("file://" + dir.string(), "max_backoff", ClientOptions{.max_backoff = -1ms});
  EXPECT_FALSE(std::filesystem::exists(dir)) << "a refused connect created the lock directory";
}

TEST(Connect, UrlIsKeptForDisplay) {
  TempDir dir;
  auto client = connect(dir.url());
  EXPECT_EQ(client->url(), dir.url());
  EXPECT_EQ(client->scheme(), "file");
  EXPECT_TRUE(client->ping().ok());
}

class BadInput : public ::testing::Test {
 protected:
  TempDir dir_;
  std::shared_ptr<Client> client_ = connect(dir_.url());

  void expect_mutex_refused(const std::string& name, MutexOptions options, const std::string& part) {
    const auto before = dir_.entries();
    std::string message;
    EXPECT_EQ(thrown_code([&] { (void)client_->mutex(name, options); }, &message), errc::invalid_argument)
        << ::testing::PrintToString(name);
    EXPECT_THAT(message, HasSubstr(part)) << ::testing::PrintToString(name);
    EXPECT_EQ(dir_.entries(), before) << "a refused mutex() touched the lock directory";
  }
};

TEST_F(BadInput, NamesAreRefused) {
  expect_mutex_refused("", {}, "name");
  expect_mutex_refused(std::string(513, 'a'), {}, "name");
  expect_mutex_refused("bad\xC0\xAF", {}, "UTF-8");
  expect_mutex_refused("bad\xED\xA0\x80", {}, "UTF-8");
  expect_mutex_refused("trunc\xE2\x82", {}, "UTF-8");
  expect_mutex_refused("a\nb", {}, "control character");
  expect_mutex_refused(std::string("a\0b", 3), {}, "control character");
}

TEST_F(BadInput, NameTooLongAfterEncodingIsRefusedByTheFileBackend) {
  // 240 plain bytes fit the file backend's limit; one more does not.
  EXPECT_NO_THROW((void)client_->mutex(std::string(240, 'a')));
  expect_mutex_refused(std::string(241, 'a'), {}, "file backend");
  // 81 'é' are only 162 bytes (under the generic 512) but encode to 486.
  std::string accented;
  for (int i = 0; i < 81; ++i) accented += "\xC3\xA9";
  expect_mutex_refused(accented, {}, "name");
  // 80 '/' encode to exactly 240 bytes.
  EXPECT_NO_THROW((void)client_->mutex(std::string(80, '/')));
  expect_mutex_refused(std::string(81, '/'), {}, "name");
}

TEST_F(BadInput, OptionsAreRefused) {
  expect_mutex_refused("x", {.lease = 0ms}, "lease");
  expect_mutex_refused("x", {.lease = -1s}, "lease");
  expect_mutex_refused("x", {.lease = 25h}, "lease");
  expect_mutex_refused("x", {.lease = 2ms}, "lease");
  expect_mutex_refused("x", {.lease = 1s, .renew_interval = 1s}, "renew_interval");
  expect_mutex_refused("x", {.lease = 1s, .renew_interval = -1ms}, "renew_interval");
  expect_mutex_refused("x", {.lease_mode = static_cast<LeaseMode>(9)}, "lease_mode");
}

TEST_F(BadInput, ValidMultiByteNamesWork) {
  auto m = client_->mutex("caf\xC3\xA9-\xF0\x9F\x94\x92");
  ASSERT_TRUE(m.try_lock());
  auto locks = client_->list_locks();
  ASSERT_EQ(locks.size(), 1u);
  EXPECT_EQ(locks[0].name, "caf\xC3\xA9-\xF0\x9F\x94\x92");
  EXPECT_EQ(locks[0].token, m.token());
  m.unlock();
  EXPECT_TRUE(client_->list_locks().empty());
}

TEST_F(BadInput, NamesDifferingOnlyInEncodedCharactersAreDifferentLocks) {
  // '/' is encoded as "%2F": a literal "%2F" must not collide with it.
  auto a = client_->mutex("a/b");
  auto b = client_->mutex("a%2Fb");
  auto c = client_->mutex(".x");
  auto d = client_->mutex("%2Ex");
  ASSERT_TRUE(a.try_lock());
  ASSERT_TRUE(c.try_lock());
  auto other = connect(dir_.url());
  EXPECT_TRUE(test::on_other_thread([&] {
    auto ob = other->mutex("a%2Fb");
    auto od = other->mutex("%2Ex");
    bool got = ob.try_lock() && od.try_lock();
    ob.unlock();
    od.unlock();
    return got;
  }));
  a.unlock();
  c.unlock();
  (void)b;
  (void)d;
}

}  // namespace
}  // namespace dlock
