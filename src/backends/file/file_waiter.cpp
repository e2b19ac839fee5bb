#include "backends/file/file_waiter.h"

#include "backends/file/doorbell.h"

#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace dlock::detail::file {
namespace {

static_assert(wake_on_release == IN_CLOSE_WRITE && wake_on_write == IN_MODIFY &&
              wake_on_change == (IN_CLOSE_WRITE | IN_MODIFY));

constexpr std::size_t max_idle_instances = 16;

class FileWaiter final : public Waiter {
 public:
  FileWaiter(Watches& watches, int inotify_fd, int wd, int place, std::function<void()> on_close, Doorbell doorbell)
      : watches_(watches),
        fd_(inotify_fd),
        wd_(wd),
        place_(place),
        on_close_(std::move(on_close)),
        doorbell_(std::move(doorbell)) {}
  ~FileWaiter() override {
    if (on_close_) on_close_();
    if (place_ >= 0) ::close(place_);
    close_doorbell(doorbell_);
    watches_.give_back(fd_, wd_);
  }
  FileWaiter(const FileWaiter&) = delete;
  FileWaiter& operator=(const FileWaiter&) = delete;

  Status wait_until(steady::time_point until) override {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(until - steady::now());
    int timeout = static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, 60'000));
    pollfd p[2] = {{fd_, POLLIN, 0}, {doorbell_.fd, POLLIN, 0}};
    int n = ::poll(p, doorbell_.fd >= 0 ? 2 : 1, timeout);
    if (n < 0 && errno != EINTR)
      return Status(errc::unavailable, std::string("file backend: waiting for a change: ") + std::strerror(errno));
    if (n > 0 && p[0].revents) drain(fd_);
    if (n > 0 && p[1].revents) drain_doorbell(doorbell_.fd);
    return {};
  }

  static void drain(int fd) {
    alignas(inotify_event) char buf[4096];
    while (::read(fd, buf, sizeof buf) > 0) {
    }
  }

 private:
  Watches& watches_;
  int fd_;
  int wd_;
  int place_;
  std::function<void()> on_close_;
  Doorbell doorbell_;
};

}  // namespace

Watches::~Watches() {
  for (int fd : idle_) ::close(fd);
}

std::unique_ptr<Waiter> Watches::watch(const std::string& path, std::uint32_t mask, int place,
                                       std::function<void()> on_close, Doorbell doorbell) {
  int fd = -1;
  {
    std::lock_guard lk(mu_);
    if (!idle_.empty()) {
      fd = idle_.back();
      idle_.pop_back();
    }
  }
  if (fd < 0) {
    fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) warn_out_of_instances(errno);
  }
  const int wd = fd < 0 ? -1 : ::inotify_add_watch(fd, path.c_str(), mask | IN_DONT_FOLLOW | IN_DELETE_SELF);
  if (wd < 0) {
    if (fd >= 0) give_back(fd, -1);
    // Rung by the release that hands it on; a holder's death is seen at the
    // caller's next retry.
    if (doorbell.fd >= 0)
      return std::make_unique<FileWaiter>(*this, -1, -1, place, std::move(on_close), std::move(doorbell));
    if (on_close) on_close();
    if (place >= 0) ::close(place);
    close_doorbell(doorbell);
    return nullptr;
  }
  return std::make_unique<FileWaiter>(*this, fd, wd, place, std::move(on_close), std::move(doorbell));
}

void Watches::give_back(int fd, int wd) noexcept {
  if (fd < 0) return;
  if (wd >= 0) (void)::inotify_rm_watch(fd, wd);
  FileWaiter::drain(fd);
  {
    std::lock_guard lk(mu_);
    if (idle_.size() < max_idle_instances) {
      try {
        idle_.push_back(fd);
        return;
      } catch (...) {
      }
    }
  }
  ::close(fd);
}

void Watches::warn_out_of_instances(int error) noexcept {
  if (warned_.exchange(true)) return;
  try {
    std::string message = std::string("file backend: no inotify instance for a waiter (") + std::strerror(error) + ")";
    if (error == EMFILE)
      message += "; raise fs.inotify.max_user_instances (sysctl). Waiters in line still wake on their doorbells; "
                 "other waits poll until instances are free again";
    events_.log(LogLevel::warning, message);
  } catch (...) {
  }
}

}  // namespace dlock::detail::file
