// sqlite://'s files on this host are only their owner's to control: the
// database file and the wake-up pipes next to it are never reached through
// a symlink, are refused when another user owns them or others may write
// to them, and a release writes only into a wake-up pipe of this user. No
// server: the file system only.
#include "backends/sqlite/pipe_wakeups.h"

#include "unit_support.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace dlock {
namespace {

using test::refused;
using test::TempDir;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string url_of(const fs::path& db) { return "sqlite://" + db.string(); }

std::uintmax_t size_of(const fs::path& p) { return fs::file_size(p); }

TEST(SqliteFiles, ADatabaseThatIsASymlinkIsRefusedAndTheFileItNamesIsLeftAlone) {
  TempDir dir;
  const auto victim = dir.path() / "victim";
  { std::ofstream(victim) << "not yours"; }
  fs::permissions(victim, fs::perms::owner_read | fs::perms::owner_write);
  fs::create_symlink(victim, dir.path() / "locks.db");
  EXPECT_THAT(refused(url_of(dir.path() / "locks.db")), HasSubstr("is a symlink"));
  EXPECT_EQ(size_of(victim), 9u);
  EXPECT_FALSE(fs::exists(dir.path() / "locks.db.wake"));
}

// A FIFO planted at the database's path is refused at once: opening it
// to look must not wait for a writer (the call would hang past any
// deadline).
TEST(SqliteFiles, AFifoAtTheDatabasePathIsRefusedWithoutWaiting) {
  TempDir dir;
  const auto db = dir.path() / "locks.db";
  ASSERT_EQ(::mkfifo(db.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THAT(refused(url_of(db)), HasSubstr("not a regular file"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, test::scaled(std::chrono::seconds(5)));
}

TEST(SqliteFiles, ADatabaseOthersMayWriteIsRefused) {
  TempDir dir;
  const auto db = dir.path() / "locks.db";
  ASSERT_TRUE(connect(url_of(db))->ping().ok());  // made 0600 by the first client
  fs::permissions(db, fs::perms::group_write | fs::perms::others_write, fs::perm_options::add);
  EXPECT_THAT(refused(url_of(db)), HasSubstr("writable by group or others"));
}

TEST(SqliteFiles, AWakeUpDirectoryOthersMayWriteIsRefused) {
  TempDir dir;
  const auto db = dir.path() / "locks.db";
  fs::create_directory(dir.path() / "locks.db.wake");
  fs::permissions(dir.path() / "locks.db.wake", fs::perms::all);
  EXPECT_THAT(refused(url_of(db)), HasSubstr("wake-up directory"));
  EXPECT_THAT(refused(url_of(db)), HasSubstr("writable by group or others"));
}

TEST(SqliteFiles, AWakeUpDirectoryThatIsASymlinkIsRefused) {
  TempDir dir;
  fs::create_directory(dir.path() / "elsewhere");
  fs::permissions(dir.path() / "elsewhere", fs::perms::owner_all);
  fs::create_directory_symlink(dir.path() / "elsewhere", dir.path() / "locks.db.wake");
  EXPECT_THAT(refused(url_of(dir.path() / "locks.db")), HasSubstr("symlink"));
  EXPECT_TRUE(fs::is_empty(dir.path() / "elsewhere"));
}

// A waiter's address comes from the database, which a local attacker may
// not write but the names in <db>.wake are plain: what is put there under
// a waiter's name is written to only if it is this user's FIFO.
TEST(SqliteFiles, AReleaseWritesOnlyIntoAWakeUpPipeNeverThroughWhatIsPlantedUnderItsName) {
  TempDir dir;
  const std::string db = (dir.path() / "locks.db").string();
  auto wakeups = detail::sqlite::PipeWakeups::open(db, std::make_shared<detail::sql::Mailbox>());
  ASSERT_TRUE(wakeups) << wakeups.status().message();
  const detail::sql::WakeTarget target{"owner", "mutex", "name"};

  const auto victim = dir.path() / "victim";
  { std::ofstream(victim) << "keep"; }
  const std::string linked = "0123456789abcdef0123456789abcdef";
  fs::create_symlink(victim, dir.path() / "locks.db.wake" / linked);
  (*wakeups)->wake(linked, target);
  EXPECT_EQ(size_of(victim), 4u) << "a release wrote through a symlink";

  const std::string planted = "fedcba9876543210fedcba9876543210";
  { std::ofstream(dir.path() / "locks.db.wake" / planted) << "keep"; }
  (*wakeups)->wake(planted, target);
  EXPECT_EQ(size_of(dir.path() / "locks.db.wake" / planted), 4u) << "a release wrote into a regular file";

  // Its own pipe it does write to: the mailbox is told (the check above
  // would pass if wake() wrote nowhere at all).
  auto mailbox = std::make_shared<detail::sql::Mailbox>();
  auto other = detail::sqlite::PipeWakeups::open(db, mailbox);
  ASSERT_TRUE(other) << other.status().message();
  auto slot = mailbox->enter(target);
  (*wakeups)->wake((*other)->address(), target);
  EXPECT_TRUE(test::eventually(
      [&] {
        std::lock_guard lk(slot->mu);
        return slot->woken;
      },
      std::chrono::seconds(5)));
  mailbox->leave(target);
}

}  // namespace
}  // namespace dlock
