#include "backends/file/lock_file.h"

#include <fcntl.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace dlock::detail::file {
namespace {

Status os_error(const char* step) {
  return Status(errc::unavailable, std::string("file backend: ") + step + ": " + std::strerror(errno));
}

struct flock range(short type, std::int64_t start) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = start;
  fl.l_len = 1;
  fl.l_pid = 0;  // required by OFD locks
  return fl;
}

}  // namespace

std::int64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

Status take_guard(int fd, bool write, std::chrono::milliseconds timeout) {
  auto fl = range(write ? F_WRLCK : F_RDLCK, 0);
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::microseconds(20);
  for (int attempt = 0;; ++attempt) {
    if (fcntl(fd, F_OFD_SETLK, &fl) == 0) return {};
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EACCES) return os_error("locking the record");
    // Guards are held for microseconds: yield first, then sleep briefly.
    if (attempt < 64) {
      sched_yield();
      continue;
    }
    if (std::chrono::steady_clock::now() >= give_up)
      return Status(errc::unavailable,
                    "file backend: the lock record stayed busy for longer than op_timeout "
                    "(is a process stopped while updating it?)");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

void drop_guard(int fd) {
  auto fl = range(F_UNLCK, 0);
  (void)fcntl(fd, F_OFD_SETLK, &fl);
}

Result<Record> read_record(int fd) {
  Record r{};
  ssize_t n = pread(fd, &r, sizeof r, 0);
  if (n < 0) return os_error("reading the lock record");
  if (n == 0) {
    std::memset(&r, 0, sizeof r);
    std::memcpy(r.magic, record_magic, sizeof r.magic);
    return r;
  }
  if (static_cast<std::size_t>(n) != sizeof r || std::memcmp(r.magic, record_magic, sizeof r.magic) != 0)
    return Result<Record>(errc::internal, "file backend: a file in the lock directory is not a dlock lock file");
  if (r.owner_len > sizeof r.owner) r.owner_len = sizeof r.owner;
  return r;
}

Status write_record(int fd, const Record& record, bool sync) {
  ssize_t n = pwrite(fd, &record, sizeof record, 0);
  if (n != static_cast<ssize_t>(sizeof record)) return os_error("writing the lock record");
  if (sync && fdatasync(fd) != 0) return os_error("syncing the lock record");
  return {};
}

Result<bool> holder_alive(int fd, std::uint64_t token) {
  auto fl = range(F_WRLCK, live_base + static_cast<std::int64_t>(token));
  if (fcntl(fd, F_OFD_GETLK, &fl) != 0) return os_error("probing the holder");
  return fl.l_type != F_UNLCK;
}

Status take_liveness(int fd, std::uint64_t token) {
  auto fl = range(F_WRLCK, live_base + static_cast<std::int64_t>(token));
  while (fcntl(fd, F_OFD_SETLK, &fl) != 0) {
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EACCES)
      return Status(errc::internal, "file backend: the liveness lock of a fresh token is taken");
    return os_error("marking the holder alive");
  }
  return {};
}

std::string encode_name(std::string_view name) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(name.size() + 5);
  for (std::size_t i = 0; i < name.size(); ++i) {
    auto c = static_cast<unsigned char>(name[i]);
    bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                c == '-' || (c == '.' && i > 0);
    if (keep) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 0xf]);
    }
  }
  out += ".lock";
  return out;
}

std::string decode_name(std::string_view file_name) {
  constexpr std::string_view suffix = ".lock";
  if (file_name.size() <= suffix.size() || !file_name.ends_with(suffix) || file_name.front() == '.') return {};
  file_name.remove_suffix(suffix.size());
  std::string out;
  for (std::size_t i = 0; i < file_name.size(); ++i) {
    if (file_name[i] != '%') {
      out.push_back(file_name[i]);
      continue;
    }
    if (i + 2 >= file_name.size()) return {};
    auto hex = [](char c) { return c <= '9' ? c - '0' : c - 'A' + 10; };
    out.push_back(static_cast<char>(hex(file_name[i + 1]) * 16 + hex(file_name[i + 2])));
    i += 2;
  }
  return out;
}

bool owner_is(const Record& record, std::string_view owner) {
  return record.owner_len == owner.size() && std::memcmp(record.owner, owner.data(), owner.size()) == 0;
}

void set_owner(Record& record, std::string_view owner) {
  std::memset(record.owner, 0, sizeof record.owner);
  record.owner_len = static_cast<std::uint32_t>(std::min(owner.size(), sizeof record.owner));
  std::memcpy(record.owner, owner.data(), record.owner_len);
}

}  // namespace dlock::detail::file
