#include "backends/file/doorbell.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace dlock::detail::file {
namespace {

// "\0dlock-file/<device>/<inode>/<ticket>" (a leading NUL: abstract).
struct Address {
  sockaddr_un addr{};
  socklen_t len = 0;
};

Address address_of(const FileId& file, std::uint64_t ticket) {
  Address a;
  a.addr.sun_family = AF_UNIX;
  char name[96];
  const int n =
      std::snprintf(name, sizeof name, "dlock-file/%llx/%llx/%llx", static_cast<unsigned long long>(file.device),
                    static_cast<unsigned long long>(file.inode), static_cast<unsigned long long>(ticket));
  std::memcpy(a.addr.sun_path + 1, name, static_cast<std::size_t>(n));
  a.len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + static_cast<std::size_t>(n));
  return a;
}

}  // namespace

Result<FileId> file_id(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    return Status(errc::unavailable, std::string("file backend: inspecting a lock file: ") + std::strerror(errno));
  return FileId{static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino)};
}

Result<int> open_doorbell(const FileId& file, std::uint64_t ticket) {
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status(errc::unavailable, std::string("file backend: a waiter's socket: ") + std::strerror(errno));
  const Address a = address_of(file, ticket);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&a.addr), a.len) != 0) {
    Status s(errc::unavailable, std::string("file backend: binding a waiter's socket: ") + std::strerror(errno));
    ::close(fd);
    return s;
  }
  return fd;
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

bool DoorbellRinger::ring(const FileId& file, std::uint64_t ticket) noexcept {
  if (fd_ < 0) return false;
  const Address a = address_of(file, ticket);
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
