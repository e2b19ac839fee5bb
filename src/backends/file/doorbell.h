// doorbell.h — how a release wakes exactly one waiter in line on file://.
//
// Each waiter in line binds a datagram socket named
// ".doorbell-<device>-<inode>-<ticket>" after the lock file and its ticket;
// the releaser sends one byte to the waiter first in line. Only the lock
// directory's owner can reach one. The sockets live in a directory nobody
// else may enter or change: /dev/shm/dlock-doorbells-<euid> (0700, this
// user's; tmpfs, so binding and removing one costs microseconds, where on
// a disk file system each cost a journalled create and unlink, ~0.5 ms,
// inside the file's guard), else the lock directory itself (refused by the
// backend unless it is this user's or root's with no group or other write:
// nobody else can bind a name in it first), reached as
// "/proc/self/fd/<descriptor>/<name>" so that any path fits sun_path's
// 108 bytes. Each socket is made 0600 before it is bound, so nobody else can
// send to it even where they may enter the directory. (Names in Linux's
// abstract socket namespace, used before, had no owner: anyone could ring
// them or bind a coming ticket's name first.) Processes sharing a lock
// directory but not /dev/shm (other mount namespaces) can't reach each
// other's doorbells: the send fails, and the release wakes everyone.
// Without either directory a waiter gets no doorbell: it waits out of
// line, and releases wake it through inotify (file_waiter.h).
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

// Where a backend's doorbells are (see above). Unusable (fd() < 0) if
// neither directory is this user's: then nobody gets a doorbell.
class Doorbells {
 public:
  explicit Doorbells(int lock_dir_fd) noexcept;
  ~Doorbells();
  Doorbells(const Doorbells&) = delete;
  Doorbells& operator=(const Doorbells&) = delete;
  int fd() const { return fd_; }
  const std::string& prefix() const { return prefix_; }  // the directory's path, '/'-ended

 private:
  int fd_ = -1;
  std::string prefix_;
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
