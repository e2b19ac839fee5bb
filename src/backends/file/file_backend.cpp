// file:// — locks as files in one directory on one host (the embedded default).
//
// See lock_file.h for the layout. Waiters block in poll() on an inotify
// watch of the lock file: the holder's release ends with close(), and a dead
// holder's descriptors are closed by the kernel, both of which raise
// IN_CLOSE_WRITE. Failed attempts keep their descriptor open (a small pool)
// so they don't wake the other waiters.
#include "backends/file/lock_file.h"
#include "core/driver.h"
#include "core/local_path.h"
#include "core/owner_id.h"
#include "core/url.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

namespace dlock::detail {
namespace {

using namespace file;

constexpr std::size_t max_encoded_name = 240;  // + ".lock" stays under NAME_MAX (255)
constexpr std::size_t max_idle_descriptors = 256;

Status os_error(const std::string& step) {
  return Status(errc::unavailable, "file backend: " + step + ": " + std::strerror(errno));
}

std::int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class FileGrant final : public GrantState {
 public:
  explicit FileGrant(int descriptor) : fd(descriptor) {}
  ~FileGrant() override {
    if (fd >= 0) ::close(fd);
  }
  int fd;
};

// Releases the guard on every path out of a record update.
class GuardScope {
 public:
  explicit GuardScope(int fd) : fd_(fd) {}
  ~GuardScope() { drop_guard(fd_); }
  GuardScope(const GuardScope&) = delete;
  GuardScope& operator=(const GuardScope&) = delete;

 private:
  int fd_;
};

class FileWaiter final : public Waiter {
 public:
  explicit FileWaiter(int inotify_fd) : fd_(inotify_fd) {}
  ~FileWaiter() override { ::close(fd_); }

  Status wait_until(steady::time_point until) override {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(until - steady::now());
    int timeout = static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, 60'000));
    pollfd p{fd_, POLLIN, 0};
    int n = ::poll(&p, 1, timeout);
    if (n < 0 && errno != EINTR) return os_error("waiting for a release");
    if (n > 0) {
      alignas(inotify_event) char buf[4096];
      while (::read(fd_, buf, sizeof buf) > 0) {
      }
    }
    return {};
  }

 private:
  int fd_;
};

class FileBackend final : public Backend, public LockDriver {
 public:
  FileBackend(std::string dir, int dir_fd, bool sync, std::chrono::milliseconds op_timeout)
      : dir_(std::move(dir)), dir_fd_(dir_fd), sync_(sync), op_timeout_(op_timeout), pid_(::getpid()) {}

  ~FileBackend() override {
    for (auto& [name, fds] : idle_)
      for (int fd : fds) ::close(fd);
    ::close(dir_fd_);
  }

  Status validate_name(std::string_view name) const override {
    auto encoded = encode_name(name).size() - 5;
    if (encoded > max_encoded_name)
      return Status(errc::invalid_argument, "name: encodes to a " + std::to_string(encoded) +
                                                "-byte file name, longer than the file backend's limit of " +
                                                std::to_string(max_encoded_name) +
                                                " (characters other than A-Z a-z 0-9 _ - . take 3 bytes each)");
    return {};
  }

  LockDriver& locks() override { return *this; }

  Status ping() override {
    int fd = ::openat(dir_fd_, ".dlock-ping", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return os_error("opening the ping file");
    Status s = take_guard(fd, true, op_timeout_);
    if (s.ok()) {
      std::int64_t now = monotonic_ns();
      if (::pwrite(fd, &now, sizeof now, 0) != static_cast<ssize_t>(sizeof now)) s = os_error("writing");
      drop_guard(fd);
    }
    ::close(fd);
    return s;
  }

  Result<Attempt> try_acquire(const LockRequest& request) override {
    const auto sent = steady::now();
    const std::string file = encode_name(request.name);
    auto fd = take_descriptor(file);
    if (!fd) return fd.status();
    if (Status s = take_guard(*fd, true, op_timeout_); !s) {
      ::close(*fd);
      return s;
    }
    std::optional<GuardScope> guard(std::in_place, *fd);
    auto record = read_record(*fd);
    if (!record) {
      guard.reset();
      ::close(*fd);
      return record.status();
    }
    const std::int64_t now = monotonic_ns();
    if (record->holder_token != 0 && record->expires_ns > now) {
      auto alive = holder_alive(*fd, record->holder_token);
      if (!alive) {
        guard.reset();
        ::close(*fd);
        return alive.status();
      }
      if (*alive) {
        guard.reset();
        put_descriptor(file, *fd);
        return Attempt(Busy{sent + std::chrono::nanoseconds(record->expires_ns - now)});
      }
    }
    // Free, its holder dead, or its lease over: it is ours.
    const std::uint64_t token = record->last_token + 1;
    Status s = take_liveness(*fd, token);
    if (s) {
      record->last_token = token;
      record->holder_token = token;
      record->expires_ns = now + std::chrono::nanoseconds(request.lease).count();
      record->acquired_unix_ms = unix_ms();
      record->holder_pid = pid_;
      set_owner(*record, request.owner);
      s = write_record(*fd, *record, sync_);
    }
    guard.reset();
    if (!s) {
      ::close(*fd);  // drops the liveness lock too
      return s;
    }
    Grant grant;
    grant.token = token;
    grant.valid_until = sent + request.lease;
    grant.state = std::make_unique<FileGrant>(*fd);
    return Attempt(std::move(grant));
  }

  std::unique_ptr<Waiter> watch(const LockRequest& request) override {
    int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) return nullptr;  // out of inotify instances: core falls back to polling
    std::string path = dir_ + "/" + encode_name(request.name);
    if (::inotify_add_watch(fd, path.c_str(), IN_CLOSE_WRITE | IN_DONT_FOLLOW | IN_DELETE_SELF) < 0) {
      ::close(fd);
      return nullptr;
    }
    return std::make_unique<FileWaiter>(fd);
  }

  Status release(const LockRequest& request, Grant& grant) override {
    auto* state = static_cast<FileGrant*>(grant.state.get());
    if (!state || state->fd < 0) return Status(errc::lock_lost, "release '" + request.name + "': no grant");
    Status s = update_own_record(request, grant, [](Record& r) {
      r.holder_token = 0;
      r.expires_ns = 0;
      r.holder_pid = 0;
      set_owner(r, "");
      return Status{};
    });
    // Closing drops our liveness lock and wakes the waiters (IN_CLOSE_WRITE).
    ::close(state->fd);
    state->fd = -1;
    return s;
  }

  void renew(std::span<Renewal> batch) override {
    for (auto& item : batch) {
      const auto sent = steady::now();
      const auto lease = item.request->lease;
      const std::int64_t expires = monotonic_ns() + std::chrono::nanoseconds(lease).count();
      item.outcome = update_own_record(*item.request, *item.grant, [&](Record& r) {
        // A lease that ran out is not brought back, even if nobody took it
        // (as on every other backend): the holder may have been told it lost.
        if (r.expires_ns <= monotonic_ns())
          return Status(errc::lock_lost, "lock '" + item.request->name + "': the lease ran out before renewal");
        r.expires_ns = expires;
        return Status{};
      });
      if (item.outcome.ok()) item.grant->valid_until = sent + lease;
    }
  }

  Status force_release(std::string_view name) override {
    int fd = ::openat(dir_fd_, encode_name(name).c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? Status{} : os_error("opening the lock file");
    Status s = take_guard(fd, true, op_timeout_);
    if (s) {
      GuardScope guard(fd);
      auto record = read_record(fd);
      if (!record) {
        s = record.status();
      } else if (record->holder_token != 0) {
        record->holder_token = 0;
        record->expires_ns = 0;
        record->holder_pid = 0;
        set_owner(*record, "");
        s = write_record(fd, *record, sync_);
      }
    }
    ::close(fd);
    return s;
  }

  Result<std::vector<LockInfo>> list(std::string_view prefix) override {
    int dfd = ::openat(dir_fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return os_error("listing the lock directory");
    DIR* dir = ::fdopendir(dfd);
    if (!dir) {
      ::close(dfd);
      return os_error("listing the lock directory");
    }
    std::vector<LockInfo> out;
    while (dirent* entry = ::readdir(dir)) {
      std::string name = decode_name(entry->d_name);
      if (name.empty() || !std::string_view(name).starts_with(prefix)) continue;
      int fd = ::openat(dir_fd_, entry->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) continue;
      if (take_guard(fd, false, op_timeout_)) {
        auto record = read_record(fd);
        drop_guard(fd);
        const std::int64_t now = monotonic_ns();
        if (record && record->holder_token != 0 && record->expires_ns > now) {
          auto alive = holder_alive(fd, record->holder_token);
          if (alive && *alive) {
            LockInfo info;
            info.name = name;
            info.holder = "pid " + std::to_string(record->holder_pid) + " owner " +
                          short_owner(std::string_view(record->owner, record->owner_len));
            info.token = record->holder_token;
            info.remaining = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::nanoseconds(record->expires_ns - now));
            out.push_back(std::move(info));
          }
        }
      }
      ::close(fd);
    }
    ::closedir(dir);
    return out;
  }

 private:
  // Rewrites the record if it still names this grant and `change` agrees;
  // lock_lost otherwise.
  template <class Change>
  Status update_own_record(const LockRequest& request, Grant& grant, Change change) {
    auto* state = static_cast<FileGrant*>(grant.state.get());
    if (!state || state->fd < 0) return Status(errc::lock_lost, "lock '" + request.name + "': released");
    if (Status s = take_guard(state->fd, true, op_timeout_); !s) return s;
    GuardScope guard(state->fd);
    auto record = read_record(state->fd);
    if (!record) return record.status();
    if (record->holder_token != grant.token || !owner_is(*record, request.owner))
      return Status(errc::lock_lost, "lock '" + request.name + "': taken over by another holder (lease ran out)");
    if (Status s = change(*record); !s) return s;
    return write_record(state->fd, *record, sync_);
  }

  Result<int> take_descriptor(const std::string& file) {
    {
      std::lock_guard lk(mu_);
      if (auto it = idle_.find(file); it != idle_.end() && !it->second.empty()) {
        int fd = it->second.back();
        it->second.pop_back();
        --idle_count_;
        return fd;
      }
    }
    int fd = ::openat(dir_fd_, file.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return os_error("opening lock file '" + file + "'");
    return fd;
  }

  void put_descriptor(const std::string& file, int fd) {
    {
      std::lock_guard lk(mu_);
      if (idle_count_ < max_idle_descriptors) {
        idle_[file].push_back(fd);
        ++idle_count_;
        return;
      }
    }
    ::close(fd);
  }

  const std::string dir_;
  const int dir_fd_;
  const bool sync_;
  const std::chrono::milliseconds op_timeout_;
  const std::int32_t pid_;  // recorded for dlock status; a client is not used across fork()
  std::mutex mu_;
  std::map<std::string, std::vector<int>> idle_;  // guarded by mu_
  std::size_t idle_count_ = 0;                    // guarded by mu_
};

Status invalid(std::string why) { return Status(errc::invalid_argument, "file url: " + std::move(why)); }

}  // namespace

Result<std::unique_ptr<Backend>> open_file_backend(const Url& url, const ClientOptions& options) {
  if (!url.endpoints.empty() && !(url.endpoints.size() == 1 && url.endpoints[0].host == "localhost"))
    return invalid("takes no host; write file:///absolute/dir");
  if (url.user || url.password) return invalid("takes no user or password");
  const std::string& dir = url.path;
  if (dir.empty() || dir.front() != '/') return invalid("needs an absolute directory, e.g. file:///var/lib/myapp/locks");
  if (dir == "/") return invalid("refusing to keep lock files in '/'");
  // One trailing '/' is fine for a directory.
  const std::string path = dir.back() == '/' ? dir.substr(0, dir.size() - 1) : dir;
  if (!is_plain_absolute_path(path))
    return invalid("directory '" + dir + "' must be a plain path without '.', '..' or empty segments");
  bool sync = false;
  for (const auto& [key, value] : url.query) {
    if (key == "fsync") {
      if (value == "1" || value == "true") sync = true;
      else if (value == "0" || value == "false") sync = false;
      else return invalid("fsync must be true or false (got '" + value + "')");
    } else {
      return invalid("unknown option '" + key + "' (known: fsync)");
    }
  }
  // Refuse a network file system before creating anything there.
  if (on_network_file_system(parent_dir(path)))
    return invalid("'" + path + "' is on a network file system, where these locks are not reliable");
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    if (errno == ENOENT) return invalid("the parent of '" + path + "' does not exist");
    return os_error("creating '" + path + "'");
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOTDIR || errno == ELOOP) return invalid("'" + path + "' is not a directory (or is a symlink)");
    return os_error("opening '" + path + "'");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    Status s = os_error("inspecting '" + path + "'");
    ::close(fd);
    return s;
  }
  std::string problem;
  if (st.st_uid != ::geteuid() && st.st_uid != 0)
    problem = "'" + path + "' belongs to another user";
  else if (st.st_mode & (S_IWGRP | S_IWOTH))
    problem = "'" + path + "' is writable by group or others, who could replace lock files (chmod 0700)";
  else if (on_network_file_system(path))  // the directory may itself be a mount point
    problem = "'" + path + "' is on a network file system, where these locks are not reliable";
  if (!problem.empty()) {
    ::close(fd);
    return invalid(problem);
  }
  return std::unique_ptr<Backend>(std::make_unique<FileBackend>(path, fd, sync, options.op_timeout));
}

}  // namespace dlock::detail
