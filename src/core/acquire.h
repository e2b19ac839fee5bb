// acquire.h — the one acquire loop every backend and primitive uses.
#pragma once

#include "core/backoff.h"
#include "core/driver.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <variant>

namespace dlock::detail {

// One acquisition as the steps of the acquire loop: attempt; if busy,
// subscribe to the backend's notification (or, on a backend without
// notifications, back off with jitter) and wait; attempt again. acquire()
// below runs them on the calling thread; the async acquirer
// (async_acquirer.h) runs many at once on its one thread, without blocking
// in a wait. `request` must outlive it.
//
// Adds to `wakeups` each wait that ended before its retry time (a
// notification woke it, or a spurious wake-up did): what a herd of woken
// waiters would show; and to `waits` (if given) one if the first attempt
// found the lock busy and the loop went on to wait.
class Acquisition {
 public:
  Acquisition(LockDriver& driver, const LockRequest& request, steady::time_point deadline,
              const ClientOptions& options, std::atomic<std::uint64_t>& wakeups,
              std::atomic<std::uint64_t>* waits = nullptr);

  // Before each attempt: where the store keeps a queue, the Waiter that
  // holds our place is made before the first one.
  void prepare();

  // Wait until `until` (for the Waiter's notification, if there is one;
  // `waiter` is owned by the acquisition) before the next attempt.
  struct Wait {
    steady::time_point until;
    Waiter* waiter = nullptr;
  };
  // Attempt again at once (a subscription was just made: a release between
  // the failed attempt and it would otherwise be missed; or a grant was
  // read after its lease had run out, and was let go).
  struct Again {};
  // The loop's end: a grant, nullopt (not by the deadline) or an error
  // (e.g. unavailable ends the loop at once).
  using Outcome = Result<std::optional<Grant>>;
  using Step = std::variant<Outcome, Wait, Again>;

  // What to do after an attempt answered `attempt`.
  Step settle(Result<Attempt> attempt);

  // After a wait (`early`: it ended before its `until`): the lock, if the
  // release handed it to us while we waited.
  std::optional<Grant> woken(bool early);

  // For a wait on a Waiter that cannot call back (Waiter::on_notify): when
  // to attempt again instead, polling with backoff.
  steady::time_point poll_until(const Wait& wait);

  const LockRequest& request() const noexcept { return request_; }
  steady::time_point deadline() const noexcept { return deadline_; }
  Waiter* waiter() const noexcept { return waiter_.get(); }

 private:
  // A grant read after its own lease ended: released, true.
  bool stale(Grant& grant);

  LockDriver& driver_;
  const LockRequest& request_;
  const steady::time_point deadline_;
  std::atomic<std::uint64_t>& wakeups_;
  std::atomic<std::uint64_t>* waits_;
  Backoff backoff_;
  std::unique_ptr<Waiter> waiter_;
  bool prepared_ = false;
  bool subscribed_ = false;
  bool counted_wait_ = false;
};

// Tries to take the lock until `deadline` (an Acquisition run on the
// calling thread). Always makes at least one attempt. nullopt: not
// acquired by the deadline.
Result<std::optional<Grant>> acquire(LockDriver& driver, const LockRequest& request,
                                     steady::time_point deadline, const ClientOptions& options,
                                     std::atomic<std::uint64_t>& wakeups,
                                     std::atomic<std::uint64_t>* waits = nullptr);

}  // namespace dlock::detail
