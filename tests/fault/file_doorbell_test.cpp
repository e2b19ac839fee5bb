// file://'s doorbells (src/backends/file/doorbell.h) against another local
// user and against a name already taken: a ring from another user reaches
// nobody, a squatter never receives a wake-up, and a waiter whose doorbell
// could not be bound publishes no ticket in line (releases then wake it
// through inotify). "Another user" is a child process that switched to
// uid/gid 65534 (nobody); the tests run as root, as in CI. Last, the dlock
// tool's default store in a directory another user owns.
#include <dlock/dlock.h>

#include "backends/file/doorbell.h"
#include "backends/file/lock_file.h"
#include "backends/file/waiter_line.h"

#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace dlock {
namespace {

using namespace detail::file;
using namespace std::chrono_literals;

constexpr uid_t nobody = 65534;

std::chrono::milliseconds scaled(std::chrono::milliseconds d) {
  const char* s = std::getenv("DLOCK_TEST_TIME_SCALE");
  const double f = s && std::strtod(s, nullptr) > 0 ? std::strtod(s, nullptr) : 1.0;
  return std::chrono::milliseconds(static_cast<std::int64_t>(static_cast<double>(d.count()) * f));
}

// A private 0700 lock directory, removed at the end.
class LockDir {
 public:
  LockDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "dlock-doorbell-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
    fd_ = ::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  }
  ~LockDir() {
    ::close(fd_);
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  int fd() const { return fd_; }
  // A descriptor of the lock file `name`, created if missing.
  int open(const std::string& name) const { return ::openat(fd_, name.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600); }

 private:
  std::string path_;
  int fd_ = -1;
};

bool readable(int fd, std::chrono::milliseconds within) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(within.count())) == 1 && (p.revents & POLLIN);
}

void become(uid_t uid) {
  if (uid == ::geteuid()) return;
  if (::setresgid(uid, uid, uid) != 0 || ::setresuid(uid, uid, uid) != 0) ::_exit(90);
}

// In a child as `uid`: rings the doorbell of `ticket` in `file`; its exit
// status says whether the ring went out (0) or not (1).
bool ring_as(uid_t uid, const Doorbells& bells, const FileId& file, std::uint64_t ticket) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    become(uid);
    DoorbellRinger ringer;
    ::_exit(ringer.ring(bells, file, ticket) ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) <= 1) << "the ringing child failed: " << status;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// A child as `uid` that binds the doorbell of `ticket` in `file` first and
// keeps it until stop() says what reached it.
class Squatter {
 public:
  Squatter(uid_t uid, const Doorbells& bells, const FileId& file, std::uint64_t ticket) {
    int ready[2], stop[2], out[2];
    if (::pipe(ready) != 0 || ::pipe(stop) != 0 || ::pipe(out) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ == 0) {
      become(uid);
      auto bell = open_doorbell(bells, file, ticket);
      const char bound = bell ? 'b' : 'n';
      (void)!::write(ready[1], &bound, 1);
      char c;
      (void)!::read(stop[0], &c, 1);
      const char got = bell && readable(bell->fd, 0ms) ? 'r' : '-';
      (void)!::write(out[1], &got, 1);
      if (bell) close_doorbell(*bell);
      ::_exit(0);
    }
    ::close(ready[1]);
    ::close(stop[0]);
    ::close(out[1]);
    char c = 0;
    (void)!::read(ready[0], &c, 1);
    bound_ = c == 'b';
    ::close(ready[0]);
    stop_ = stop[1];
    out_ = out[0];
  }
  ~Squatter() {
    if (pid_ > 0) (void)received();
  }
  bool bound() const { return bound_; }
  // Whether a wake-up reached the squatter; ends the child.
  bool received() {
    if (pid_ <= 0) return received_;
    const char go = 'g';
    (void)!::write(stop_, &go, 1);
    char c = 0;
    (void)!::read(out_, &c, 1);
    ::close(stop_);
    ::close(out_);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    received_ = c == 'r';
    return received_;
  }

 private:
  pid_t pid_ = -1;
  int stop_ = -1, out_ = -1;
  bool bound_ = false;
  bool received_ = false;
};

// What a release does: ring the first waiter in line, if any.
bool ring_first_in_line(const Doorbells& bells, int fd) {
  auto first = first_waiter(fd, mutex_line, monotonic_ns());
  if (!first || !*first) return false;
  auto id = file_id(fd);
  DoorbellRinger ringer;
  return id && ringer.ring(bells, *id, (*first)->waiter.ticket);
}

TEST(FileDoorbell, AnotherUsersRingReachesNobody) {
  LockDir dir;
  // A lock directory others may enter (no group or other write is all
  // the backend asks of it): the doorbell itself must keep them out.
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  Doorbells bells(dir.fd());
  const int fd = dir.open("x");
  auto id = file_id(fd);
  ASSERT_TRUE(id);
  auto bell = open_doorbell(bells, *id, 7);
  ASSERT_TRUE(bell) << bell.status().message();

  EXPECT_FALSE(ring_as(nobody, bells, *id, 7)) << "another user's datagram was accepted";
  EXPECT_FALSE(readable(bell->fd, 0ms)) << "another user's ring reached the doorbell";
  // The owner's ring still does.
  EXPECT_TRUE(ring_as(::geteuid(), bells, *id, 7));
  EXPECT_TRUE(readable(bell->fd, 0ms));
  close_doorbell(*bell);
  ::close(fd);
}

// Joins the line of `fd` (a Mutex's) under its guard, and rings whoever
// is first then, as a release would.
struct JoinOutcome {
  bool published = false;  // a ticket of ours is in line
  bool rang_us = false;    // and the ring woke our doorbell
};
JoinOutcome join_and_ring(const Doorbells& bells, const LockDir& dir, int fd) {
  JoinOutcome out;
  const int place = dir.open("x");
  std::optional<Joined> joined;
  {
    EXPECT_TRUE(take_guard(fd, true, 1000ms));
    GuardScope guard(fd);
    auto j = join_line(bells, fd, mutex_line, place, 0, monotonic_ns(), false);
    if (j && *j) joined = **j;
  }
  auto first = first_waiter(fd, mutex_line, monotonic_ns());
  out.published = first && *first;
  if (out.published) {
    EXPECT_TRUE(joined);
    ring_first_in_line(bells, fd);
    out.rang_us = joined && joined->doorbell.fd >= 0 && readable(joined->doorbell.fd, 100ms);
  }
  if (joined) {
    EXPECT_TRUE(take_guard(fd, true, 1000ms));
    GuardScope guard(fd);
    EXPECT_TRUE(leave_line(fd, mutex_line, joined->place, false));
    close_doorbell(joined->doorbell);
  }
  ::close(place);
  return out;
}

// The first ticket a fresh lock file gives out.
constexpr std::uint64_t first_ticket = 1;

TEST(FileDoorbell, AnotherUserCannotSquatAWaitersName) {
  LockDir dir;
  Doorbells bells(dir.fd());
  const int fd = dir.open("x");
  auto id = file_id(fd);
  ASSERT_TRUE(id);
  Squatter squatter(nobody, bells, *id, first_ticket);
  const JoinOutcome joined = join_and_ring(bells, dir, fd);
  EXPECT_FALSE(squatter.received()) << "another user's socket received our wake-up";
  EXPECT_FALSE(squatter.bound()) << "another user bound our doorbell's name";
  if (joined.published) {
    EXPECT_TRUE(joined.rang_us) << "a ticket was published that our doorbell does not answer";
  }
  ::close(fd);
}

TEST(FileDoorbell, ATakenNameIsNeverPublished) {
  LockDir dir;
  Doorbells bells(dir.fd());
  const int fd = dir.open("x");
  auto id = file_id(fd);
  ASSERT_TRUE(id);
  // Another process of ours holds the name (a live socket): our bind fails.
  Squatter squatter(::geteuid(), bells, *id, first_ticket);
  ASSERT_TRUE(squatter.bound());
  const JoinOutcome joined = join_and_ring(bells, dir, fd);
  EXPECT_FALSE(joined.published) << "a waiter published a ticket its doorbell could not be bound for";
  EXPECT_FALSE(squatter.received()) << "the process holding the name received our wake-up";
  ::close(fd);
}

// Through the public API: a waiter whose doorbell name is taken still gets
// the lock promptly when it is released (woken through inotify), and the
// squatter hears nothing.
TEST(FileDoorbell, AWaiterWithATakenNameStillGetsTheLockOnRelease) {
  LockDir dir;
  Doorbells bells(dir.fd());
  auto holder = connect("file://" + dir.path());
  auto waiter = connect("file://" + dir.path());
  auto held = holder->mutex("x");
  held.lock();
  const int fd = dir.open(encode_name("x"));
  auto id = file_id(fd);
  ASSERT_TRUE(id);
  Squatter squatter(::geteuid(), bells, *id, first_ticket);
  ASSERT_TRUE(squatter.bound());

  std::atomic<bool> got{false};
  std::thread t([&] {
    auto m = waiter->mutex("x");
    m.lock();
    got = true;
    m.unlock();
  });
  std::this_thread::sleep_for(scaled(200ms));  // in line (or not) by now
  const auto released = std::chrono::steady_clock::now();
  held.unlock();
  t.join();
  const auto took = std::chrono::steady_clock::now() - released;
  EXPECT_TRUE(got);
  EXPECT_FALSE(squatter.received()) << "the process holding the name received the wake-up";
  // Woken by the release itself, not by the 500 ms re-check.
  EXPECT_LT(took, scaled(400ms));
  ::close(fd);
}

// The default store's directory ($XDG_RUNTIME_DIR/dlock here; /tmp/dlock-<uid>
// without it, the same check) made first by another user: the error names
// the directory, its owner and what to do instead.
TEST(FileDefaultDirectory, AnotherUsersDirectoryIsNamedWithItsOwnerAndTheFix) {
  LockDir runtime;
  const std::string store = runtime.path() + "/dlock";
  ASSERT_EQ(::mkdir(store.c_str(), 0700), 0);
  ASSERT_EQ(::chown(store.c_str(), nobody, nobody), 0);
  const std::string command =
      "env -u DLOCK_BACKEND XDG_RUNTIME_DIR='" + runtime.path() + "' '" DLOCK_TOOL "' run job -- true 2>&1";
  FILE* p = ::popen(command.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = ::pclose(p);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 64) << out;  // refused with the command line: choose another store
  EXPECT_NE(out.find("'" + store + "'"), std::string::npos) << out;
  EXPECT_NE(out.find("uid 65534"), std::string::npos) << out;
  if (const passwd* pw = ::getpwuid(nobody)) {
    EXPECT_NE(out.find(pw->pw_name), std::string::npos) << out;
  }
  EXPECT_NE(out.find("XDG_RUNTIME_DIR"), std::string::npos) << out;
  EXPECT_NE(out.find("--backend"), std::string::npos) << out;
}

}  // namespace
}  // namespace dlock
