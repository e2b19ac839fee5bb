// backoff.h — exponential backoff with jitter for retries and polling.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>

namespace dlock::detail {

// Delays grow from `first` doubling up to `cap`; each delay is drawn
// uniformly from [d/2, d] so competing waiters don't retry in lock-step.
class Backoff {
 public:
  Backoff(std::chrono::microseconds first, std::chrono::microseconds cap);
  std::chrono::microseconds next();
  void reset() { current_ = first_; }

 private:
  std::chrono::microseconds first_, cap_, current_;
};

}  // namespace dlock::detail
