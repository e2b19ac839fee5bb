// held_lock.h — one lock held by one thread of this client (or by a
// dlock::Hold of the async API), as core keeps it: its grant, hold count,
// renewal state and loss.
#pragma once

#include "core/driver.h"

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>

namespace dlock::detail {

struct HeldLock {
  LockRequest request;
  Grant grant;                          // guarded by mu
  std::uint64_t token = 0;              // grant.token, never changes: readable without mu
  std::uint64_t thread = 0;             // thread_ordinal() of the holding thread
  std::size_t count = 1;                // guarded by ClientState's table mutex
  std::chrono::milliseconds renew_every{};
  steady::time_point next_renewal{};    // guarded by the lease keeper's mutex
  bool released = false;                // guarded by mu: no renewal after this
  bool renewing = false;                // guarded by mu: a renewal of grant is in flight
  bool in_keeper = false;               // guarded by the lease keeper's mutex
  std::atomic<bool> lost{false};
  // grant.valid_until, readable without mu (lease_end / set_lease_end).
  std::atomic<steady::rep> valid_until{steady::time_point::max().time_since_epoch().count()};
  std::atomic<std::uint64_t>* lost_counter = nullptr;  // the client's count of lost holds
  const Events* events = nullptr;                      // where a loss is logged
  std::stop_source stop;
  std::mutex mu;                        // serialises renewal against release
  std::condition_variable renewed;      // renewing turned false

  // Marks the hold released once no renewal is in flight: after this the
  // lease keeper never touches its grant again.
  void stop_renewals() {
    std::unique_lock g(mu);
    renewed.wait(g, [&] { return !renewing; });
    released = true;
  }
  // Marks the hold lost when the store drops it (Grant::dropped). Declared
  // last: destroyed first, so it never runs on a half-destroyed hold.
  std::unique_ptr<std::stop_callback<std::function<void()>>> on_dropped;

  // Marks the lease gone, once: lost() turns true, stop_token() fires, the
  // client counts it and logs `why`.
  void mark_lost(std::string_view why) noexcept {
    if (lost.exchange(true)) return;
    if (lost_counter) lost_counter->fetch_add(1, std::memory_order_relaxed);
    stop.request_stop();
    // Logged after the stop is requested, so the holder hears of it first.
    if (events) {
      try {
        events->log(LogLevel::warning, std::string(kind_name(request.kind)) + " '" + request.name + "' lost: " +
                                           std::string(why));
      } catch (...) {
      }
    }
  }


  steady::time_point lease_end() const noexcept { return steady::time_point(steady::duration(valid_until.load())); }
  void set_lease_end(steady::time_point t) noexcept { valid_until.store(t.time_since_epoch().count()); }
  bool past_deadline() const noexcept { return steady::now() >= lease_end(); }

  // Lost, or past its local deadline: a holder that was paused knows it the
  // moment it runs again, before the lease keeper has had a chance to run.
  // May run stop callbacks: never call it while holding a lock.
  bool check_lost() noexcept {
    if (!lost.load() && past_deadline()) mark_lost(expiry_reason());
    return lost.load();
  }

  // Why a hold past its local deadline is lost: the same words whoever sees
  // it first (the holder's own check or the lease keeper).
  std::string_view expiry_reason() const noexcept {
    return request.mode == LeaseMode::fixed ? "its fixed lease ran out"
                                            : "its lease ran out before a renewal reached the store";
  }
};

}  // namespace dlock::detail
