// doorbell.h — how a release wakes exactly one Mutex waiter on file://.
//
// Each waiter in line binds a datagram socket in Linux's abstract socket
// namespace (no file: it goes with its descriptor, also when its process
// dies) under a name made of the lock file's identity and its ticket; the
// releaser sends one byte to the waiter first in line. A waiter in another
// network namespace cannot be reached so: ring() then fails, and the
// releaser falls back to waking every waiter (see file_backend.cpp).
#pragma once

#include <dlock/status.h>

#include <cstdint>

namespace dlock::detail::file {

// Which lock file, as the kernel knows it (st_dev, st_ino).
struct FileId {
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
};
Result<FileId> file_id(int fd);

// A bound, non-blocking doorbell for the waiter with `ticket` in `file`;
// unavailable if the name is taken or sockets are refused.
Result<int> open_doorbell(const FileId& file, std::uint64_t ticket);

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
  // listens under that name here (gone, or another network namespace).
  bool ring(const FileId& file, std::uint64_t ticket) noexcept;

 private:
  int fd_;
};

}  // namespace dlock::detail::file
