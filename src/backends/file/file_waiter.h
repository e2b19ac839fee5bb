// file_waiter.h — waiting for a change to one file of the lock directory:
// a blocking poll() on an inotify watch of it, no polling of the file; and
// for a Mutex's waiter in line, on its doorbell too (doorbell.h).
#pragma once

#include "backends/file/doorbell.h"
#include "core/driver.h"
#include "core/events.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace dlock::detail::file {

// A release ends with close() (IN_CLOSE_WRITE), and a dead holder's
// descriptors are closed by the kernel, which raises it too. A counter's
// waiters wake on writes only (IN_MODIFY): every call opens and closes the
// file, and closes would wake them for nothing. Observers of an election
// and barrier members wake on both.
inline constexpr std::uint32_t wake_on_release = 0x00000008;              // IN_CLOSE_WRITE
inline constexpr std::uint32_t wake_on_write = 0x00000002;                // IN_MODIFY
inline constexpr std::uint32_t wake_on_change = 0x00000008 | 0x00000002;  // IN_CLOSE_WRITE | IN_MODIFY

// The inotify instances a backend's Waiters use, kept for reuse. Closing an
// instance that watched a file waits for a grace period of the kernel's
// (about 10 ms), which a waiter that has just got its lock would pay before
// returning; removing the watch and keeping the instance costs nothing.
// A kept instance may still deliver an event of its last watch: a spurious
// wake-up, which Waiter allows. Thread-safe.
//
// inotify instances are few (fs.inotify.max_user_instances, 128 by default,
// for all of a user's processes). Without one, a waiter in line still
// waits on its doorbell, and everything else polls; the first time it
// happens the client logs a warning that says which limit to raise.
class Watches {
 public:
  explicit Watches(Events& events) : events_(events) {}
  ~Watches();
  Watches(const Watches&) = delete;
  Watches& operator=(const Watches&) = delete;

  // A Waiter on `path`; if inotify can't watch it (out of instances, the
  // file is gone), one on `doorbell` alone, or nullptr without a doorbell:
  // the caller then polls. `place`, if >= 0,
  // is a descriptor whose byte locks hold the waiter's place (a writer
  // waiting, an election ticket, a Mutex's waiter slot): closed with the
  // Waiter, after `on_close` runs. `doorbell`, if bound, wakes it as well
  // (closed after `place`, so nobody rings a place that is gone).
  std::unique_ptr<Waiter> watch(const std::string& path, std::uint32_t mask, int place = -1,
                                std::function<void()> on_close = {}, Doorbell doorbell = {});
  // A Waiter's instance (if >= 0) back, its watch `wd` (if >= 0) removed.
  void give_back(int fd, int wd) noexcept;

 private:
  void warn_out_of_instances(int error) noexcept;

  Events& events_;
  std::atomic<bool> warned_{false};
  std::mutex mu_;
  std::vector<int> idle_;  // guarded by mu_
};

}  // namespace dlock::detail::file
