#include "backends/redis/revalidator.h"

#include "core/thread_name.h"

#include <chrono>

namespace dlock::detail::redis {

Revalidator::Revalidator(Check check) : check_(std::move(check)), thread_([this] {
      name_this_thread("dlock-revalid");
      run();
    }) {}

Revalidator::~Revalidator() { stop(); }

void Revalidator::request(const std::set<int>& slots) {
  {
    std::lock_guard lk(mu_);
    if (slots.empty()) all_ = true;
    else slots_.insert(slots.begin(), slots.end());
  }
  cv_.notify_one();
}

void Revalidator::stop() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void Revalidator::run() {
  std::unique_lock lk(mu_);
  auto requested = [&] { return stopping_ || all_ || !slots_.empty(); };
  for (;;) {
    cv_.wait(lk, requested);
    if (stopping_) return;
    std::set<int> slots;
    if (!all_) slots.swap(slots_);
    all_ = false;
    slots_.clear();
    for (int attempt = 0; attempt < 50; ++attempt) {
      lk.unlock();
      bool done = false;
      try {
        done = check_(slots);
      } catch (...) {
      }
      lk.lock();
      if (done) break;
      // Another request meanwhile: one round checks both.
      if (cv_.wait_for(lk, std::chrono::milliseconds(100), requested)) {
        if (slots.empty()) all_ = true;
        else slots_.insert(slots.begin(), slots.end());
        break;
      }
    }
  }
}

}  // namespace dlock::detail::redis
