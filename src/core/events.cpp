#include "core/events.h"

#include <string>

namespace dlock {

std::string_view to_string(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::debug: return "debug";
    case LogLevel::info: return "info";
    case LogLevel::warning: return "warning";
    case LogLevel::error: return "error";
  }
  return "unknown";
}

namespace detail {

void Events::set_log(std::function<void(LogLevel, std::string_view)> log) {
  std::lock_guard lk(mu_);
  log_ = std::move(log);
}

void Events::log(LogLevel level, std::string_view message) const noexcept {
  std::function<void(LogLevel, std::string_view)> sink;
  {
    std::lock_guard lk(mu_);
    if (!log_) return;
    sink = log_;
  }
  try {
    sink(level, message);
  } catch (...) {
    // A logger that throws must not break a release or a renewal.
  }
}

void Events::connection_lost(std::string_view what) noexcept {
  disconnects_.fetch_add(1, std::memory_order_relaxed);
  try {
    log(LogLevel::warning, "connection lost: " + std::string(what));
  } catch (...) {
  }
}

void Events::connection_restored(std::string_view what) noexcept {
  reconnects_.fetch_add(1, std::memory_order_relaxed);
  try {
    log(LogLevel::info, "connection restored: " + std::string(what));
  } catch (...) {
  }
}

}  // namespace detail
}  // namespace dlock
