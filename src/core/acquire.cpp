#include "core/acquire.h"

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

Acquisition::Acquisition(LockDriver& driver, const LockRequest& request, steady::time_point deadline,
                         const ClientOptions& options, std::atomic<std::uint64_t>& wakeups,
                         std::atomic<std::uint64_t>* waits)
    : driver_(driver),
      request_(request),
      deadline_(deadline),
      wakeups_(wakeups),
      waits_(waits),
      backoff_(std::chrono::milliseconds(1), options.max_backoff) {}

void Acquisition::prepare() {
  if (std::exchange(prepared_, true)) return;
  if (driver_.waits_in_queue() && deadline_ > steady::now()) {
    // The place in the store's queue is taken by the first attempt and kept
    // by the waiter: no attempt, release and re-queue per wait.
    subscribed_ = true;
    waiter_ = driver_.watch(request_);
  }
}

bool Acquisition::stale(Grant& grant) {
  // Its lease had run out by the time we read the answer: this process
  // stood still (stopped, starved) between sending the request and reading
  // the reply, and the store may have given the lock to another since. Not
  // a hold: let it go (if it is still ours) and ask again.
  if (grant.valid_until > steady::now()) return false;
  (void)driver_.release(request_, grant);
  return true;
}

Acquisition::Step Acquisition::settle(Result<Attempt> attempt) {
  if (!attempt) return Outcome(attempt.status());
  if (auto* grant = std::get_if<Grant>(&*attempt)) {
    if (stale(*grant)) return Again{};
    return Outcome(std::optional<Grant>(std::move(*grant)));
  }
  const Busy& busy = std::get<Busy>(*attempt);

  const auto now = steady::now();
  if (now >= deadline_) return Outcome(std::optional<Grant>());
  if (waits_ && !std::exchange(counted_wait_, true)) waits_->fetch_add(1, std::memory_order_relaxed);
  if (!subscribed_) {
    // Subscribe, then try once more: a release between the failed
    // attempt and the subscription would otherwise be missed.
    subscribed_ = true;
    waiter_ = driver_.watch(request_);
    if (waiter_) return Again{};
  }
  auto wake = deadline_;
  if (busy.holder_expires != steady::time_point::max())
    wake = std::min(wake, busy.holder_expires + expiry_margin);
  wake = std::min(wake, busy.ask_again);
  if (waiter_) return Wait{std::min(wake, now + notification_safety_net), waiter_.get()};
  return Wait{std::min(wake, now + backoff_.next()), nullptr};
}

std::optional<Grant> Acquisition::woken(bool early) {
  if (early) wakeups_.fetch_add(1, std::memory_order_relaxed);
  // Handed to us by the release itself: no attempt needed.
  if (!waiter_) return std::nullopt;
  auto grant = waiter_->take_grant();
  if (grant && stale(*grant)) return std::nullopt;  // the next attempt asks again
  return grant;
}

steady::time_point Acquisition::poll_until(const Wait& wait) {
  return std::min(wait.until, steady::now() + backoff_.next());
}

Result<std::optional<Grant>> acquire(LockDriver& driver, const LockRequest& request,
                                     steady::time_point deadline, const ClientOptions& options,
                                     std::atomic<std::uint64_t>& wakeups, std::atomic<std::uint64_t>* waits) {
  Acquisition acquisition(driver, request, deadline, options, wakeups, waits);
  for (;;) {
    acquisition.prepare();
    auto step = acquisition.settle(driver.try_acquire(request));
    if (auto* outcome = std::get_if<Acquisition::Outcome>(&step)) return std::move(*outcome);
    if (std::holds_alternative<Acquisition::Again>(step)) continue;
    const auto& wait = std::get<Acquisition::Wait>(step);
    if (!wait.waiter) {
      std::this_thread::sleep_until(wait.until);
      continue;
    }
    if (Status s = wait.waiter->wait_until(wait.until); !s) return s;
    if (auto grant = acquisition.woken(steady::now() < wait.until)) return std::optional<Grant>(std::move(*grant));
  }
}

}  // namespace dlock::detail
