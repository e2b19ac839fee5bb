// password_file= (core/url.h, take_password_file): a password read from a
// file only its owner may read, instead of written in the URL where ps and
// shell histories show it; refused, naming the file and the fix, if others
// may read it, if it is a symlink, or if the URL has a password too.
#include "core/url.h"

#include "unit_support.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace dlock::detail {
namespace {

using test::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

fs::path secret_file(const TempDir& dir, const std::string& text, fs::perms perms = fs::perms::owner_read) {
  const auto path = dir.path() / "redis.pass";
  { std::ofstream(path) << text; }
  fs::permissions(path, perms);
  return path;
}

Url parsed(const std::string& text) {
  auto url = parse_url(text);
  EXPECT_TRUE(url) << text;
  return url ? *url : Url{};
}

TEST(PasswordFile, ThePasswordComesFromTheFileAndTheOptionGoes) {
  TempDir dir;
  const auto path = secret_file(dir, "Zq9Secret77\n");
  Url url = parsed("redis://app@h:6379/0?password_file=" + path.string() + "&prefix=x:");
  ASSERT_TRUE(take_password_file(url).ok());
  EXPECT_EQ(url.password, "Zq9Secret77");
  EXPECT_EQ(url.user, "app");
  EXPECT_EQ(url.query.count("password_file"), 0u);
  EXPECT_EQ(url.query.at("prefix"), "x:");
  EXPECT_THAT(url.redacted(), Not(HasSubstr("Zq9Secret77")));
}

TEST(PasswordFile, AFileOthersMayReadASymlinkOrTwoPasswordsAreRefused) {
  TempDir dir;
  const auto readable = secret_file(dir, "Zq9Secret77", fs::perms::owner_read | fs::perms::others_read);
  Url url = parsed("redis://h?password_file=" + readable.string());
  Status s = take_password_file(url);
  EXPECT_EQ(s.code(), errc::invalid_argument);
  EXPECT_THAT(s.message(), HasSubstr("may be read or written by group or others (chmod 600)"));
  EXPECT_THAT(s.message(), Not(HasSubstr("Zq9Secret77")));
  EXPECT_FALSE(url.password);

  fs::permissions(readable, fs::perms::owner_read);
  fs::create_symlink(readable, dir.path() / "link");
  url = parsed("redis://h?password_file=" + (dir.path() / "link").string());
  EXPECT_THAT(take_password_file(url).message(), HasSubstr("symlink"));

  url = parsed("redis://:other@h?password_file=" + readable.string());
  EXPECT_THAT(take_password_file(url).message(), HasSubstr("not both"));
  url = parsed("redis://h?password_file=" + (dir.path() / "missing").string());
  EXPECT_THAT(take_password_file(url).message(), HasSubstr("cannot be read"));
  // A FIFO is refused, not waited on.
  ASSERT_EQ(::mkfifo((dir.path() / "fifo").c_str(), 0600), 0);
  url = parsed("redis://h?password_file=" + (dir.path() / "fifo").string());
  EXPECT_THAT(take_password_file(url).message(), HasSubstr("not a regular file"));
  url = parsed("redis://h?password_file=relative/path");
  EXPECT_THAT(take_password_file(url).message(), HasSubstr("absolute path"));
}

// Every store takes it: the file backend, which takes no password, is told one.
TEST(PasswordFile, ReachesTheStoreThroughConnect) {
  TempDir dir;
  const auto path = secret_file(dir, "Zq9Secret77\n");
  std::string message;
  EXPECT_EQ(test::thrown_code([&] { (void)dlock::connect(dir.url("password_file=" + path.string())); }, &message),
            errc::invalid_argument);
  EXPECT_THAT(message, HasSubstr("takes no user or password"));
  EXPECT_THAT(message, Not(HasSubstr("Zq9Secret77")));
}

}  // namespace
}  // namespace dlock::detail
