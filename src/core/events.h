// events.h — what a client tells its user about itself: the log callback
// (ClientOptions::log) and the connection counters of ClientStats. One per
// backend (Backend::events()), so a store's session code reports a lost or
// restored connection where it sees it.
#pragma once

#include <dlock/options.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string_view>

namespace dlock::detail {

class Events {
 public:
  // Set once the client exists; messages before that are dropped (counts are kept).
  void set_log(std::function<void(LogLevel, std::string_view)> log);
  // Passes `message` to the user's callback, if any. Never throws; a
  // callback that throws is ignored. Callers keep secrets (passwords, owner
  // tokens) out of `message`.
  void log(LogLevel level, std::string_view message) const noexcept;

  // A connection to the store went away / came back (`what`: which, for the log).
  void connection_lost(std::string_view what) noexcept;
  void connection_restored(std::string_view what) noexcept;
  std::uint64_t disconnects() const noexcept { return disconnects_.load(std::memory_order_relaxed); }
  std::uint64_t reconnects() const noexcept { return reconnects_.load(std::memory_order_relaxed); }

 private:
  mutable std::mutex mu_;
  std::function<void(LogLevel, std::string_view)> log_;  // guarded by mu_
  std::atomic<std::uint64_t> disconnects_{0};
  std::atomic<std::uint64_t> reconnects_{0};
};

}  // namespace dlock::detail
