#include "backends/file/doorbell.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>

namespace dlock::detail::file {
namespace {

// ".doorbell-<device>-<inode>-<ticket>" in hex.
std::string name_of(const FileId& file, std::uint64_t ticket) {
  char name[64];
  const int n =
      std::snprintf(name, sizeof name, ".doorbell-%llx-%llx-%llx", static_cast<unsigned long long>(file.device),
                    static_cast<unsigned long long>(file.inode), static_cast<unsigned long long>(ticket));
  return std::string(name, static_cast<std::size_t>(n));
}

// "<directory>/<name>" (the directory: Doorbells::prefix()).
struct Address {
  sockaddr_un addr{};
  socklen_t len = 0;
};

Address address_of(const std::string& prefix, const std::string& name) {
  Address a;
  a.addr.sun_family = AF_UNIX;
  const int n = std::snprintf(a.addr.sun_path, sizeof a.addr.sun_path, "%s%s", prefix.c_str(), name.c_str());
  a.len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + static_cast<std::size_t>(n) + 1);
  return a;
}

// A directory only this user may enter or change: its own, 0700.
bool owner_only(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid() && (st.st_mode & 077) == 0;
}

// Whether a socket answers at `a` (a datagram socket bound there); false
// for a file a dead process left (connection refused).
bool answers(const Address& a) {
  int probe = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (probe < 0) return true;  // can't tell: treat the name as taken
  int r;
  do r = ::connect(probe, reinterpret_cast<const sockaddr*>(&a.addr), a.len);
  while (r != 0 && errno == EINTR);
  const bool refused = r != 0 && errno == ECONNREFUSED;
  ::close(probe);
  return !refused;
}

}  // namespace

Result<FileId> file_id(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    return Status(errc::unavailable, std::string("file backend: inspecting a lock file: ") + std::strerror(errno));
  return FileId{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)};
}

Doorbells::Doorbells(int lock_dir_fd) noexcept {
  try {
    // On tmpfs, shared by every process of this user on the host.
    const std::string shm = "/dev/shm/dlock-doorbells-" + std::to_string(::geteuid());
    if (::mkdir(shm.c_str(), 0700) == 0 || errno == EEXIST) {
      int fd = ::open(shm.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd >= 0 && owner_only(fd)) {
        // Through the descriptor that was checked, not the path: a
        // directory removed and made again (by a cleaner, or by another
        // user in the sticky /dev/shm) is never the one used.
        fd_ = fd;
        prefix_ = "/proc/self/fd/" + std::to_string(fd_) + "/";
        return;
      }
      if (fd >= 0) ::close(fd);
    }
    // The lock directory: nobody else may make or replace a name in it (the
    // backend checked this of the path it opened; this is what doorbells
    // rely on), reached through /proc so that any path fits sun_path.
    struct stat st {};
    if (lock_dir_fd < 0 || ::fstat(lock_dir_fd, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() ||
        (st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
      return;
    fd_ = ::fcntl(lock_dir_fd, F_DUPFD_CLOEXEC, 0);
    if (fd_ >= 0) prefix_ = "/proc/self/fd/" + std::to_string(fd_) + "/";
  } catch (...) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
}

Doorbells::~Doorbells() {
  if (fd_ >= 0) ::close(fd_);
}

Result<Doorbell> open_doorbell(const Doorbells& bells, const FileId& file, std::uint64_t ticket) {
  if (bells.fd() < 0) return Status(errc::unavailable, "file backend: no directory of this user's for doorbells");
  Doorbell bell{-1, bells.fd(), name_of(file, ticket)};
  bell.fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (bell.fd < 0)
    return Status(errc::unavailable, std::string("file backend: a waiter's socket: ") + std::strerror(errno));
  // Its file is made 0600 (whatever the umask): only its owner may send.
  if (::fchmod(bell.fd, 0600) != 0) {
    Status s(errc::unavailable, std::string("file backend: a waiter's socket: ") + std::strerror(errno));
    ::close(bell.fd);
    return s;
  }
  const Address a = address_of(bells.prefix(), bell.name);
  for (int attempt = 0;; ++attempt) {
    if (::bind(bell.fd, reinterpret_cast<const sockaddr*>(&a.addr), a.len) == 0) return bell;
    // A file left by a dead waiter: ours to replace (nobody else can write
    // to the directory). A live socket keeps its name, and we go without.
    if (errno == EADDRINUSE && attempt == 0 && !answers(a) && ::unlinkat(bells.fd(), bell.name.c_str(), 0) == 0)
      continue;
    Status s(errc::unavailable, "file backend: binding a waiter's socket '" + bell.name + "': " + std::strerror(errno));
    ::close(bell.fd);
    return s;
  }
}

void close_doorbell(Doorbell& bell) noexcept {
  if (bell.fd < 0) return;
  (void)::unlinkat(bell.dir, bell.name.c_str(), 0);
  ::close(bell.fd);
  bell.fd = -1;
}

void drain_doorbell(int doorbell) noexcept {
  char buf[64];
  while (::recv(doorbell, buf, sizeof buf, MSG_DONTWAIT) > 0) {
  }
}

DoorbellRinger::DoorbellRinger() : fd_(::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) {}

DoorbellRinger::~DoorbellRinger() {
  if (fd_ >= 0) ::close(fd_);
}

bool DoorbellRinger::ring(const Doorbells& bells, const FileId& file, std::uint64_t ticket) noexcept {
  if (fd_ < 0 || bells.fd() < 0) return false;
  Address a;
  try {
    a = address_of(bells.prefix(), name_of(file, ticket));
  } catch (...) {
    return false;
  }
  const char byte = 1;
  for (;;) {
    if (::sendto(fd_, &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(&a.addr), a.len) == 1)
      return true;
    if (errno == EINTR) continue;
    // A full queue means the waiter has unread wake-ups already: it is awake.
    return errno == EAGAIN;
  }
}

}  // namespace dlock::detail::file
