#include "backends/sqlite/pipe_wakeups.h"

#include "backends/sqlite/config.h"
#include "core/local_path.h"
#include "core/owner_id.h"
#include "core/thread_name.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

namespace dlock::detail::sqlite {
namespace {

Status os_error(const std::string& step) {
  return Status(errc::unavailable, "sqlite backend: " + step + ": " + std::strerror(errno));
}

// An address read from the database names a file we write to: only our
// own form (32 lower-case hex digits) is accepted, never a path.
bool plausible_address(std::string_view address) {
  return address.size() == 32 &&
         std::all_of(address.begin(), address.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

Result<std::shared_ptr<PipeWakeups>> PipeWakeups::open(const std::string& database_path,
                                                        std::shared_ptr<sql::Mailbox> mailbox) {
  const std::string dir = database_path + ".wake";
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return os_error("creating '" + dir + "'");
  // Everything in it is reached through this descriptor: a directory that
  // was not a directory (a symlink) when opened, or that others may write
  // to, is refused; the pipes in it are named relative to it.
  int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir_fd < 0) {
    if (errno == ENOTDIR || errno == ELOOP)
      return invalid_url("'" + dir + "' (for wake-ups) exists and is not a directory (or is a symlink)");
    return os_error("opening '" + dir + "'");
  }
  struct stat st {};
  std::string problem = ::fstat(dir_fd, &st) != 0 ? "cannot be inspected: " + std::string(std::strerror(errno))
                                                  : ownership_problem(st, dir);
  if (!problem.empty()) {
    ::close(dir_fd);
    return invalid_url("the wake-up directory " + problem);
  }
  auto address = random_client_id();
  if (!address) {
    ::close(dir_fd);
    return address.status();
  }
  if (::mkfifoat(dir_fd, address->c_str(), 0600) != 0) {
    Status s = os_error("creating the wake-up pipe '" + dir + "/" + *address + "'");
    ::close(dir_fd);
    return s;
  }
  // Read-write: the open does not wait for a writer, and the pipe never
  // reads as ended when the last writer closes.
  int pipe_fd = ::openat(dir_fd, address->c_str(), O_RDWR | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  int stop_fd = pipe_fd < 0 ? -1 : ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (pipe_fd < 0 || stop_fd < 0) {
    Status s = os_error(pipe_fd < 0 ? "opening the wake-up pipe '" + dir + "/" + *address + "'" : "eventfd");
    if (pipe_fd >= 0) ::close(pipe_fd);
    ::unlinkat(dir_fd, address->c_str(), 0);
    ::close(dir_fd);
    return s;
  }
  auto wakeups =
      std::shared_ptr<PipeWakeups>(new PipeWakeups(dir_fd, *address, std::move(mailbox), pipe_fd, stop_fd));
  wakeups->reader_ = std::jthread([raw = wakeups.get()] {
    name_this_thread("dlock-sqlite-rd");
    raw->read_loop();
  });
  return wakeups;
}

PipeWakeups::PipeWakeups(int dir_fd, std::string address, std::shared_ptr<sql::Mailbox> mailbox, int pipe_fd,
                         int stop_fd)
    : dir_fd_(dir_fd), address_(std::move(address)), mailbox_(std::move(mailbox)), pipe_fd_(pipe_fd),
      stop_fd_(stop_fd) {}

PipeWakeups::~PipeWakeups() {
  const std::uint64_t one = 1;
  (void)!::write(stop_fd_, &one, sizeof one);
  if (reader_.joinable()) reader_.join();
  ::close(pipe_fd_);
  ::close(stop_fd_);
  ::unlinkat(dir_fd_, address_.c_str(), 0);
  ::close(dir_fd_);
}

void PipeWakeups::wake(std::string_view address, const sql::WakeTarget& target) {
  if (!plausible_address(address)) return;
  const std::string name(address);
  // Only a FIFO of ours is written to: not a symlink (O_NOFOLLOW), nor a
  // file or device put there under a waiter's name. Looked at before the
  // open (opening some files has effects of its own) and after it (what
  // was opened is what was looked at).
  struct stat seen {};
  if (::fstatat(dir_fd_, name.c_str(), &seen, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISFIFO(seen.st_mode)) return;
  int fd = ::openat(dir_fd_, name.c_str(), O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    // No reader: that client is gone without removing its pipe.
    if (errno == ENXIO) ::unlinkat(dir_fd_, name.c_str(), 0);
    return;
  }
  struct stat opened {};
  if (::fstat(fd, &opened) != 0 || !S_ISFIFO(opened.st_mode) || opened.st_ino != seen.st_ino ||
      opened.st_dev != seen.st_dev || !ownership_problem(opened, name).empty()) {
    ::close(fd);
    return;
  }
  std::string message = target.encode();
  message.push_back('\0');
  // One write below PIPE_BUF is atomic; a full pipe drops the hint.
  (void)!::write(fd, message.data(), message.size());
  ::close(fd);
}

void PipeWakeups::read_loop() {
  std::string pending;
  std::array<char, 4096> buf{};
  for (;;) {
    pollfd fds[] = {{pipe_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents) return;
    for (;;) {
      ssize_t n = ::read(pipe_fd_, buf.data(), buf.size());
      if (n <= 0) break;
      pending.append(buf.data(), static_cast<std::size_t>(n));
    }
    std::size_t end;
    while ((end = pending.find('\0')) != std::string::npos) {
      if (auto target = sql::WakeTarget::decode(std::string_view(pending).substr(0, end))) mailbox_->deliver(*target);
      pending.erase(0, end + 1);
    }
  }
}

}  // namespace dlock::detail::sqlite
