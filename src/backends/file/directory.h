// directory.h — the lock directory one file:// client works in, and how
// its files are opened (0600, O_NOFOLLOW|O_CLOEXEC: nothing leaks into a
// command `dlock run` starts, and a planted symlink is refused).
#pragma once

#include <dlock/status.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>

namespace dlock::detail::file {

class Watches;  // file_waiter.h

struct Directory {
  std::string path;
  int fd = -1;
  bool sync = false;  // fdatasync after each write (?fsync=true)
  std::chrono::milliseconds op_timeout{};
  std::int32_t pid = 0;  // recorded for dlock status; a client is not used across fork()
  Watches* watches = nullptr;  // the backend's inotify instances, for Waiters

  std::string path_of(const std::string& file) const { return path + "/" + file; }

  // A descriptor for `file`: read-write and created if missing (`create`),
  // or read-only; -1 if it does not exist and was not to be created.
  Result<int> open(const std::string& file, bool create) const {
    int flags = (create ? O_RDWR | O_CREAT : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC;
    int f = ::openat(fd, file.c_str(), flags, 0600);
    if (f >= 0) return f;
    if (errno == ENOENT && !create) return -1;
    return Status(errc::unavailable, "file backend: opening '" + file + "': " + std::strerror(errno));
  }

  // What is left of `deadline`, for take_guard (never negative).
  static std::chrono::milliseconds left(std::chrono::steady_clock::time_point deadline) {
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    return ms.count() > 0 ? ms : std::chrono::milliseconds(0);
  }
};

}  // namespace dlock::detail::file
