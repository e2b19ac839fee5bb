#include "core/backoff.h"

#include <algorithm>

namespace dlock::detail {

Backoff::Backoff(std::chrono::microseconds first, std::chrono::microseconds cap)
    : first_(std::max(first, std::chrono::microseconds(1))),
      cap_(std::max(cap, first_)),
      current_(first_),
      rng_(std::random_device{}()) {}

std::chrono::microseconds Backoff::next() {
  auto d = current_;
  current_ = std::min(current_ * 2, cap_);
  std::uniform_int_distribution<std::int64_t> pick(d.count() / 2, d.count());
  return std::chrono::microseconds(pick(rng_));
}

}  // namespace dlock::detail
