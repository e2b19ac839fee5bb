// The file backend's URL checks: refused with invalid_argument, a message
// naming the problem, and nothing created on disk.
#include <dlock/dlock.h>

#include "unit_support.h"

#include <sys/stat.h>

#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dlock {
namespace {

using test::TempDir;
using test::refused;
using test::thrown_code;
using ::testing::HasSubstr;

TEST(FileUrl, NeedsAnAbsoluteDirectory) {
  EXPECT_THAT(refused("file://"), HasSubstr("absolute"));
  EXPECT_THAT(refused("file://localhost"), HasSubstr("absolute"));
  EXPECT_THAT(refused("file:///"), HasSubstr("'/'"));
}

TEST(FileUrl, TakesNoHostOrCredentials) {
  TempDir dir;
  EXPECT_THAT(refused("file://relative/dir"), HasSubstr("no host"));
  EXPECT_THAT(refused("file://example.com" + dir.path().string()), HasSubstr("no host"));
  EXPECT_THAT(refused("file://a,b" + dir.path().string()), HasSubstr("no host"));
  EXPECT_THAT(refused("file://user@" + dir.path().string()), HasSubstr("user"));
  EXPECT_THAT(refused("file://u:pw@localhost" + dir.path().string()), HasSubstr("user"));
  // localhost is the one host allowed.
  EXPECT_NO_THROW((void)connect("file://localhost" + dir.path().string()));
}

TEST(FileUrl, RefusesDotDotAndDotAndEmptySegments) {
  TempDir dir;
  const std::string d = dir.path().string();
  std::filesystem::create_directory(dir.path() / "sub", dir.path());
  ::chmod((dir.path() / "sub").c_str(), 0700);
  for (const std::string& path : {d + "/sub/../sub", d + "/sub/..", d + "/./sub", d + "//sub", d + "/%2E%2E/x", d + "/sub/.", d + "/sub//"})
    EXPECT_THAT(refused("file://" + path), HasSubstr("'..'")) << path;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "x"));
}

TEST(FileUrl, RefusesUnknownOptionsAndBadValues) {
  TempDir parent;
  const auto dir = parent.path() / "locks";
  EXPECT_THAT(refused("file://" + dir.string() + "?fsycn=true"), HasSubstr("unknown option 'fsycn'"));
  EXPECT_THAT(refused("file://" + dir.string() + "?fsync=maybe"), HasSubstr("fsync"));
  EXPECT_FALSE(std::filesystem::exists(dir)) << "a refused connect created the directory";
  EXPECT_NO_THROW((void)connect("file://" + dir.string() + "?fsync=true"));
  EXPECT_NO_THROW((void)connect("file://" + dir.string() + "?fsync=0"));
}

TEST(FileUrl, RefusesAGroupOrWorldWritableDirectory) {
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0770), 0);
  EXPECT_THAT(refused(dir.url()), HasSubstr("writable by group or others"));
  ASSERT_EQ(::chmod(dir.path().c_str(), 0703), 0);
  EXPECT_THAT(refused(dir.url()), HasSubstr("writable by group or others"));
  ASSERT_EQ(::chmod(dir.path().c_str(), 0700), 0);
  EXPECT_NO_THROW((void)connect(dir.url()));
}

TEST(FileUrl, RefusesAMissingParentAndCreatesNothing) {
  TempDir dir;
  const auto missing = dir.path() / "no" / "such" / "dir";
  EXPECT_THAT(refused("file://" + missing.string()), HasSubstr("does not exist"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "no"));
}

TEST(FileUrl, CreatesTheLastDirectoryPrivately) {
  TempDir dir;
  const auto locks = dir.path() / "locks";
  auto client = connect("file://" + locks.string() + "/");
  struct stat st {};
  ASSERT_EQ(::stat(locks.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 077, 0u) << "the lock directory is accessible to group or others";
}

TEST(FileUrl, RefusesAFileOrASymlinkInsteadOfADirectory) {
  TempDir dir;
  const auto file = dir.path() / "f";
  { std::ofstream(file) << "x"; }
  EXPECT_THAT(refused("file://" + file.string()), HasSubstr("not a directory"));
  std::filesystem::create_directory_symlink(dir.path(), dir.path() / "link");
  EXPECT_THAT(refused("file://" + (dir.path() / "link").string()), HasSubstr("symlink"));
}

// A percent-encoded NUL would cut the path short at mkdir()/open() (so
// file:///tmp/x%00y would use /tmp/x): control characters are refused.
TEST(FileUrl, RefusesAnEncodedNulOrControlCharacterInThePath) {
  TempDir dir;
  const auto real = dir.path() / "x";
  refused("file://" + real.string() + "%00y");
  refused("file://" + real.string() + "%0Ay");
  EXPECT_FALSE(std::filesystem::exists(real)) << "the path was cut at the NUL byte";
}

}  // namespace
}  // namespace dlock
