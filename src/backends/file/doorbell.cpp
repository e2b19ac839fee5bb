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
  const int n = std::snprintf(name, sizeof name, ".doorbell-%llx-%llx-%llx", static_cast<unsigned long long>(file.device),
                              static_cast<unsigned long long>(file.inode), static_cast<unsigned long long>(ticket));
  return std::string(name, static_cast<std::size_t>(n));
}

// "/proc/self/fd/<dir>/<name>": short whatever the lock directory's path.
struct Address {
  sockaddr_un addr{};
  socklen_t len = 0;
};

Address address_of(int dir, const std::string& name) {
  Address a;
  a.addr.sun_family = AF_UNIX;
  const int n = std::snprintf(a.addr.sun_path, sizeof a.addr.sun_path, "/proc/self/fd/%d/%s", dir, name.c_str());
  a.len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + static_cast<std::size_t>(n) + 1);
  return a;
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
  struct stat st {};
  // Nobody else may make or replace a name in it (the backend checked this
  // of the path it opened; this is what the doorbells rely on).
  if (lock_dir_fd < 0 || ::fstat(lock_dir_fd, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() ||
      (st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return;
  fd_ = ::fcntl(lock_dir_fd, F_DUPFD_CLOEXEC, 0);
}

Doorbells::~Doorbells() {
  if (fd_ >= 0) ::close(fd_);
}

Result<Doorbell> open_doorbell(const Doorbells& bells, const FileId& file, std::uint64_t ticket) {
  if (bells.fd() < 0) return Status(errc::unavailable, "file backend: the lock directory is not this user's");
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
  const Address a = address_of(bells.fd(), bell.name);
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
    a = address_of(bells.fd(), name_of(file, ticket));
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
