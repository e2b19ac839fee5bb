// hold.h — one lock held by one thread of this client.
#pragma once

#include "core/driver.h"

#include <atomic>
#include <cstddef>
#include <mutex>
#include <stop_token>
#include <thread>

namespace dlock::detail {

struct Hold {
  LockRequest request;
  Grant grant;                          // guarded by mu
  std::thread::id thread;
  std::size_t count = 1;                // guarded by ClientState's table mutex
  std::chrono::milliseconds renew_every{};
  steady::time_point next_renewal{};    // guarded by the lease keeper's mutex
  steady::time_point deadline{};        // copy of grant.valid_until for the keeper, guarded by its mutex
  bool released = false;                // guarded by mu: no renewal after this
  std::atomic<bool> lost{false};
  std::stop_source stop;
  std::mutex mu;                        // serialises renewal against release

  // Marks the lease gone: lost() turns true and stop_token() fires.
  void mark_lost() noexcept {
    if (!lost.exchange(true)) stop.request_stop();
  }
};

}  // namespace dlock::detail
