// doorbell.h — how a release wakes exactly one waiter in line on file://.
//
// Each waiter in line binds a datagram socket in the lock directory, named
// ".doorbell-<device>-<inode>-<ticket>" after the lock file and its ticket
// (a leading '.': no lock file's name, see encode_name); the releaser sends
// one byte to the waiter first in line. Only the directory's owner can
// reach one: the lock directory is refused unless it is this user's (or
// root's) with no group or other write (ownership_problem), so nobody else
// can bind a name in it first, and each socket is made 0600 before it is
// bound, so nobody else can send to it even where they may enter the
// directory. (Names in Linux's abstract socket namespace, used before, had
// no owner: anyone could ring them or bind them first.)
//
// A socket's path must fit sun_path (108 bytes), and a lock directory's may
// not: every address is "/proc/self/fd/<descriptor of the directory>/<name>"
// (under 90 bytes). Where that can't be bound (no /proc, a directory that
// isn't this user's) a waiter gets no doorbell: it waits out of line, and
// releases wake it through inotify (file_waiter.h).
//
// A socket's file goes when its waiter closes it (close_doorbell); one left
// by a dead process is found stale (nobody answers) and replaced by the
// next waiter that needs its name. A waiter whose name is held by a live
// socket gets no doorbell and publishes no ticket: a wake-up never goes to
// a socket its waiter does not read.
#pragma once

#include <dlock/status.h>

#include <cstdint>
#include <string>

namespace dlock::detail::file {

// Which lock file, as the kernel knows it (st_dev, st_ino).
struct FileId {
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
};
Result<FileId> file_id(int fd);

// Where a backend's doorbells are: its lock directory (a descriptor of its
// own). Unusable (fd() < 0) unless the directory is this user's with no
// group or other write: then nobody gets a doorbell.
class Doorbells {
 public:
  explicit Doorbells(int lock_dir_fd) noexcept;
  ~Doorbells();
  Doorbells(const Doorbells&) = delete;
  Doorbells& operator=(const Doorbells&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

// One waiter's bound, non-blocking socket and its name in the directory.
struct Doorbell {
  int fd = -1;
  int dir = -1;  // Doorbells::fd() (borrowed)
  std::string name;
};

// The doorbell of the waiter with `ticket` in `file`; unavailable if the
// name is held by a live socket, or sockets or the directory are refused.
// Call it before the ticket is published (the caller holds the file's guard).
Result<Doorbell> open_doorbell(const Doorbells& bells, const FileId& file, std::uint64_t ticket);

// Removes its name, then closes it (fd < 0: nothing to do).
void close_doorbell(Doorbell& bell) noexcept;

// Reads whatever rang (a waiter's wake-up), so the next wait blocks again.
void drain_doorbell(int doorbell) noexcept;

// Sends to doorbells (one socket, shared by every thread of a backend).
class DoorbellRinger {
 public:
  DoorbellRinger();
  ~DoorbellRinger();
  DoorbellRinger(const DoorbellRinger&) = delete;
  DoorbellRinger& operator=(const DoorbellRinger&) = delete;

  // Whether the doorbell of `ticket` in `file` got the byte. false: nobody
  // listens under that name (gone, never bound, or not ours to reach).
  bool ring(const Doorbells& bells, const FileId& file, std::uint64_t ticket) noexcept;

 private:
  int fd_;
};

}  // namespace dlock::detail::file
