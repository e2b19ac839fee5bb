// async_acquirer.h — the one thread per client that completes the async
// API's acquisitions (Mutex::async_lock, Semaphore::async_acquire,
// Election::async_campaign), without a thread per waiter.
//
// Each pending acquisition is an Acquisition (the one acquire loop's
// steps, acquire.h) run as a state machine. The thread makes the attempts
// of every acquisition that is due in one LockDriver::try_acquire_many
// (one pipeline on redis://); between attempts an acquisition blocks
// nothing: its Waiter calls back when notified (Waiter::on_notify), or,
// where a Waiter can only block, it is due again at its poll time
// (backoff, and Busy::holder_expires). A lock a release handed over
// (Waiter::take_grant) is taken as the blocking loop takes it, and a
// Waiter that holds a place in the store's queue (LockDriver::
// waits_in_queue) lives until the acquisition ends.
//
// Cancellation (the acquisition's stop_token) and the end of the deadline
// destroy the Waiter, which takes the store's queue entry out, before the
// acquisition completes. The destructor completes every acquisition still
// pending with errc::unavailable (their Waiters gone first) before it
// returns: no completion runs after it.
#pragma once

#include "core/acquire.h"
#include "core/driver.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <thread>

namespace dlock::detail {

class AsyncAcquirer {
 public:
  // How an acquisition ended (Acquisition::Outcome: a grant, nullopt at the
  // deadline, or an error — errc::cancelled if its stop_token fired), with
  // its request back. Runs once, on the acquirer's thread (or in its
  // destructor), with no lock of the acquirer's held: it may start another
  // acquisition, and must not block.
  using Outcome = Acquisition::Outcome;
  using Done = std::function<void(LockRequest, Outcome)>;

  // Starts the thread. `wakeups`, `waits`: as for acquire().
  AsyncAcquirer(LockDriver& driver, const ClientOptions& options, std::atomic<std::uint64_t>& wakeups,
                std::atomic<std::uint64_t>& waits);
  // Stops the thread and completes what is pending (see above). If it runs
  // on the acquirer's own thread (a completion let go of the last handle
  // on the client), the thread is left to end by itself.
  ~AsyncAcquirer();
  AsyncAcquirer(const AsyncAcquirer&) = delete;
  AsyncAcquirer& operator=(const AsyncAcquirer&) = delete;

  // Acquires `request` by `deadline` (at least one attempt), unless `stop`
  // fires first.
  void start(LockRequest request, steady::time_point deadline, std::stop_token stop, Done done);

 private:
  struct Pending;
  struct Shared;
  static void run(const std::shared_ptr<Shared>& shared);

  std::shared_ptr<Shared> shared_;
  std::thread thread_;
};

}  // namespace dlock::detail
