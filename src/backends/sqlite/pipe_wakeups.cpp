#include "backends/sqlite/pipe_wakeups.h"

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
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return os_error("inspecting '" + dir + "'");
  if (!S_ISDIR(st.st_mode))
    return Status(errc::invalid_argument, "sqlite url: '" + dir + "' (for wake-ups) exists and is not a directory");
  auto address = random_client_id();
  if (!address) return address.status();
  const std::string path = dir + "/" + *address;
  if (::mkfifo(path.c_str(), 0600) != 0) return os_error("creating the wake-up pipe '" + path + "'");
  // Read-write: the open does not wait for a writer, and the pipe never
  // reads as ended when the last writer closes.
  int pipe_fd = ::open(path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (pipe_fd < 0) {
    Status s = os_error("opening the wake-up pipe '" + path + "'");
    ::unlink(path.c_str());
    return s;
  }
  int stop_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd < 0) {
    Status s = os_error("eventfd");
    ::close(pipe_fd);
    ::unlink(path.c_str());
    return s;
  }
  auto wakeups = std::shared_ptr<PipeWakeups>(new PipeWakeups(dir, *address, std::move(mailbox), pipe_fd, stop_fd));
  wakeups->reader_ = std::jthread([raw = wakeups.get()] {
    name_this_thread("dlock-sqlite-rd");
    raw->read_loop();
  });
  return wakeups;
}

PipeWakeups::PipeWakeups(std::string dir, std::string address, std::shared_ptr<sql::Mailbox> mailbox, int pipe_fd,
                         int stop_fd)
    : dir_(std::move(dir)), address_(std::move(address)), mailbox_(std::move(mailbox)), pipe_fd_(pipe_fd),
      stop_fd_(stop_fd) {}

PipeWakeups::~PipeWakeups() {
  const std::uint64_t one = 1;
  (void)!::write(stop_fd_, &one, sizeof one);
  if (reader_.joinable()) reader_.join();
  ::close(pipe_fd_);
  ::close(stop_fd_);
  ::unlink((dir_ + "/" + address_).c_str());
}

void PipeWakeups::wake(std::string_view address, const sql::WakeTarget& target) {
  if (!plausible_address(address)) return;
  const std::string path = dir_ + "/" + std::string(address);
  int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    // No reader: that client is gone without removing its pipe.
    if (errno == ENXIO) ::unlink(path.c_str());
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
