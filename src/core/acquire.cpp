#include "core/acquire.h"

#include "core/backoff.h"

#include <algorithm>
#include <thread>
#include <utility>

namespace dlock::detail {
namespace {

// With notifications, a waiter still re-checks this often in case one was
// lost (a notification is a hint, the store's state is the truth).
constexpr std::chrono::milliseconds notification_safety_net{500};

// Retry just after the holder's lease ends, not just before.
constexpr std::chrono::milliseconds expiry_margin{1};

}  // namespace

Result<std::optional<Grant>> acquire(LockDriver& driver, const LockRequest& request,
                                     steady::time_point deadline, const ClientOptions& options,
                                     std::atomic<std::uint64_t>& wakeups, std::atomic<std::uint64_t>* waits) {
  Backoff backoff(std::chrono::milliseconds(1), options.max_backoff);
  std::unique_ptr<Waiter> waiter;
  bool subscribed = false;
  bool counted_wait = false;
  if (driver.waits_in_queue() && deadline > steady::now()) {
    // The place in the store's queue is taken by the first attempt and kept
    // by the waiter: no attempt, release and re-queue per wait.
    subscribed = true;
    waiter = driver.watch(request);
  }
  for (;;) {
    auto attempt = driver.try_acquire(request);
    if (!attempt) return attempt.status();
    if (auto* grant = std::get_if<Grant>(&*attempt)) return std::optional<Grant>(std::move(*grant));
    const Busy& busy = std::get<Busy>(*attempt);

    auto now = steady::now();
    if (now >= deadline) return std::optional<Grant>();
    if (waits && !std::exchange(counted_wait, true)) waits->fetch_add(1, std::memory_order_relaxed);
    if (!subscribed) {
      // Subscribe, then try once more: a release between the failed
      // attempt and the subscription would otherwise be missed.
      subscribed = true;
      waiter = driver.watch(request);
      if (waiter) continue;
    }
    auto wake = deadline;
    if (busy.holder_expires != steady::time_point::max())
      wake = std::min(wake, busy.holder_expires + expiry_margin);
    if (waiter) {
      wake = std::min(wake, now + notification_safety_net);
      if (Status s = waiter->wait_until(wake); !s) return s;
      if (steady::now() < wake) wakeups.fetch_add(1, std::memory_order_relaxed);
      // Handed to us by the release itself: no attempt needed.
      if (auto grant = waiter->take_grant()) return std::optional<Grant>(std::move(*grant));
    } else {
      wake = std::min(wake, now + backoff.next());
      std::this_thread::sleep_until(wake);
    }
  }
}

}  // namespace dlock::detail
