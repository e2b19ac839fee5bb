#include "core/backoff.h"

#include <algorithm>

namespace dlock::detail {

namespace {

// One engine per thread, seeded once: std::random_device is expensive (it
// runs CPUID, slow under virtualisation), far too slow for every acquire.
std::minstd_rand& thread_rng() {
  thread_local std::minstd_rand rng(std::random_device{}());
  return rng;
}

}  // namespace

Backoff::Backoff(std::chrono::microseconds first, std::chrono::microseconds cap)
    : first_(std::max(first, std::chrono::microseconds(1))), cap_(std::max(cap, first_)), current_(first_) {}

std::chrono::microseconds Backoff::next() {
  auto d = current_;
  current_ = std::min(current_ * 2, cap_);
  std::uniform_int_distribution<std::int64_t> pick(d.count() / 2, d.count());
  return std::chrono::microseconds(pick(thread_rng()));
}

}  // namespace dlock::detail
