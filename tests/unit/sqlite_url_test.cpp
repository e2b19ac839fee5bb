// The sqlite:// URL checks (backends/sqlite/config.h): the database path,
// and refusals with invalid_argument and a message naming the problem,
// before the file system is touched.
#include "backends/sqlite/config.h"
#include "core/url.h"

#include "unit_support.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

namespace dlock {
namespace {

using test::refused;
using test::TempDir;
using ::testing::HasSubstr;

TEST(SqliteUrl, ReadsTheDatabasePath) {
  auto url = detail::parse_url("sqlite:///var/lib/my%20app/locks.db");
  ASSERT_TRUE(url);
  auto config = detail::sqlite::parse_config(*url, {});
  ASSERT_TRUE(config) << config.status().message();
  EXPECT_EQ(config->path, "/var/lib/my app/locks.db");
}

TEST(SqliteUrl, RefusesWhatIsNotAPlainAbsoluteFilePath) {
  EXPECT_THAT(refused("sqlite://host/tmp/x.db"), HasSubstr("takes no host"));
  EXPECT_THAT(refused("sqlite://u:pw@/tmp/x.db"), HasSubstr("takes no user or password"));
  EXPECT_THAT(refused("sqlite:///tmp/x.db?journal=wal"), HasSubstr("unknown option 'journal'"));
  EXPECT_THAT(refused("sqlite:///tmp/"), HasSubstr("names a directory"));
  EXPECT_THAT(refused("sqlite:///tmp/../etc/x.db"), HasSubstr("plain absolute path"));
  EXPECT_THAT(refused("sqlite:///tmp//x.db"), HasSubstr("plain absolute path"));
}

TEST(SqliteUrl, RefusesAMissingDirectoryAndChangesNothing) {
  TempDir dir;
  const auto missing = dir.path() / "no-such-dir" / "locks.db";
  EXPECT_THAT(refused("sqlite://" + missing.string()), HasSubstr("does not exist"));
  EXPECT_EQ(dir.entries(), 0u);
  const auto refused_option = dir.path() / "locks.db";
  EXPECT_THAT(refused("sqlite://" + refused_option.string() + "?x=1"), HasSubstr("unknown option"));
  EXPECT_FALSE(std::filesystem::exists(refused_option));
}

}  // namespace
}  // namespace dlock
