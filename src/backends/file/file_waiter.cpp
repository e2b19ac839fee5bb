#include "backends/file/file_waiter.h"

#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace dlock::detail::file {
namespace {

static_assert(wake_on_release == IN_CLOSE_WRITE && wake_on_write == IN_MODIFY &&
              wake_on_change == (IN_CLOSE_WRITE | IN_MODIFY));

class FileWaiter final : public Waiter {
 public:
  FileWaiter(int inotify_fd, int place, std::function<void()> on_close)
      : fd_(inotify_fd), place_(place), on_close_(std::move(on_close)) {}
  ~FileWaiter() override {
    ::close(fd_);
    if (on_close_) on_close_();
    if (place_ >= 0) ::close(place_);
  }
  FileWaiter(const FileWaiter&) = delete;
  FileWaiter& operator=(const FileWaiter&) = delete;

  Status wait_until(steady::time_point until) override {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(until - steady::now());
    int timeout = static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, 60'000));
    pollfd p{fd_, POLLIN, 0};
    int n = ::poll(&p, 1, timeout);
    if (n < 0 && errno != EINTR)
      return Status(errc::unavailable, std::string("file backend: waiting for a change: ") + std::strerror(errno));
    if (n > 0) {
      alignas(inotify_event) char buf[4096];
      while (::read(fd_, buf, sizeof buf) > 0) {
      }
    }
    return {};
  }

 private:
  int fd_;
  int place_;
  std::function<void()> on_close_;
};

}  // namespace

std::unique_ptr<Waiter> watch_file(const std::string& path, std::uint32_t mask, int place,
                                   std::function<void()> on_close) {
  int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd >= 0 && ::inotify_add_watch(fd, path.c_str(), mask | IN_DONT_FOLLOW | IN_DELETE_SELF) < 0) {
    ::close(fd);
    fd = -1;
  }
  if (fd < 0) {
    if (on_close) on_close();
    if (place >= 0) ::close(place);
    return nullptr;
  }
  return std::make_unique<FileWaiter>(fd, place, std::move(on_close));
}

}  // namespace dlock::detail::file
