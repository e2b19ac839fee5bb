// The file backend on lock files it did not write (damaged, or changed by
// another program): each case was found by fuzz_file_state. The answer is
// an `internal` error naming what was found, or (where the content is still
// usable) the right result — never a crash, an allocation of what a field
// claims, a token that goes back or a lock byte past its range.
#include <dlock/dlock.h>

#include "backends/file/lock_file.h"
#include "unit_support.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dlock {
namespace {

namespace file = detail::file;
using test::TempDir;
using test::thrown_code;
using ::testing::HasSubstr;

class FileDamaged : public ::testing::Test {
 protected:
  // Writes `bytes` at `offset` of the file of `name` and `kind`.
  void put(const std::string& name, file::FileKind kind, const void* bytes, std::size_t size, off_t offset) {
    const std::string path = (dir_.path() / file::encode_name(name, kind)).string();
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, bytes, size, offset), static_cast<ssize_t>(size));
    ::close(fd);
  }
  void put_record(const std::string& name, file::FileKind kind, std::uint64_t last_token) {
    file::Record r{};
    std::memcpy(r.magic, file::record_magic, sizeof r.magic);
    r.last_token = last_token;
    put(name, kind, &r, sizeof r, 0);
  }
  void put_header(const std::string& name, file::FileKind kind, const file::Header& h) {
    put(name, kind, &h, sizeof h, file::header_offset);
  }

  TempDir dir_;
  std::shared_ptr<Client> client_ = connect("file://" + dir_.path().string());
};

// Found: a header claiming 4 billion entry slots made every acquire
// allocate (and read) 400 GB. Slots past the end of the file are free.
TEST_F(FileDamaged, AHeaderClaimingSlotsPastTheFileReadsOnlyTheFile) {
  put_record("s", file::FileKind::permits, 7);
  file::Header h{};
  h.used = 0xFFFFFFF0u;
  h.permits = 2;
  put_header("s", file::FileKind::permits, h);
  auto s = client_->semaphore("s", 2);
  ASSERT_TRUE(s.try_acquire());
  EXPECT_GT(s.token(), 7u) << "tokens never go back";
  EXPECT_EQ(s.in_use(), 1);
  s.release();
  EXPECT_EQ(s.in_use(), 0);
}

// Found: a token near 2^63 overflowed the liveness byte's offset
// (live_base + token); one past 2^40 - 1 would lock a waiter's byte.
TEST_F(FileDamaged, TokensBeyondTheirByteRangeAreRefused) {
  for (std::uint64_t last : {file::max_token + 1, std::uint64_t{1} << 63}) {
    put_record("m", file::FileKind::mutex, last);
    auto m = client_->mutex("m");
    std::string message;
    EXPECT_EQ(thrown_code([&] { (void)m.try_lock(); }, &message), errc::internal) << last;
    EXPECT_THAT(message, HasSubstr("changed by something else"));
  }
  // The last token there is: no next one, rather than one out of range.
  put_record("m", file::FileKind::mutex, file::max_token);
  auto m = client_->mutex("m");
  EXPECT_EQ(thrown_code([&] { (void)m.try_lock(); }), errc::internal);
  // One below it: granted, and the next token is the last one.
  put_record("m", file::FileKind::mutex, file::max_token - 1);
  ASSERT_TRUE(m.try_lock());
  EXPECT_EQ(m.token(), file::max_token);
  m.unlock();
}

// Found: a 32-bit counter holding a 64-bit value blamed the caller's
// fetch_add (invalid_argument) for the file's content.
TEST_F(FileDamaged, ACounterOutsideItsWidthIsTheFilesFault) {
  file::CountRecord c{};
  std::memcpy(c.magic, file::count_magic, sizeof c.magic);
  c.width = 4;
  c.value = std::int64_t{1} << 40;
  put("c", file::FileKind::counter, &c, sizeof c, 0);
  auto counter = client_->counter("c");
  std::string message;
  EXPECT_EQ(thrown_code([&] { (void)counter.fetch_add(1); }, &message), errc::internal);
  EXPECT_THAT(message, HasSubstr("32-bit counter"));
  EXPECT_EQ(thrown_code([&] { (void)counter.load(); }), errc::internal);
}

TEST_F(FileDamaged, NegativePermitsAreRefused) {
  put_record("n", file::FileKind::permits, 0);
  file::Header h{};
  h.permits = -3;
  put_header("n", file::FileKind::permits, h);
  auto s = client_->semaphore("n", 2);
  std::string message;
  EXPECT_EQ(thrown_code([&] { (void)s.try_acquire(); }, &message), errc::internal);
  EXPECT_THAT(message, HasSubstr("-3 permits"));
}

}  // namespace
}  // namespace dlock
