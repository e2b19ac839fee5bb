// lease_keeper.h — the one background thread per client that keeps leases alive.
//
// Watchdog leases are renewed every renew_interval, all those due at once in
// one batch (one round trip per batch where the store allows); leases due
// within half an interval join the batch early, so the leases of a client
// converge on one schedule. A renewal
// the store refuses marks the hold lost at once; renewals that fail to reach
// the store are retried until the lease's local deadline, where the hold is
// marked lost even if the store never answered. Fixed leases are never
// renewed and are marked lost at their local deadline.
#pragma once

#include "core/driver.h"
#include "core/held_lock.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace dlock::detail {

class LeaseKeeper {
 public:
  explicit LeaseKeeper(LockDriver& driver);
  ~LeaseKeeper();  // stops and joins the thread
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  void add(std::shared_ptr<HeldLock> hold);
  // After remove() returns the keeper starts no renewal of `hold`. One
  // already in flight has hold->renewing set; HeldLock::stop_renewals() (as
  // ClientState::release calls) waits for it and excludes later ones.
  void remove(HeldLock* hold);

  struct Counters {
    std::uint64_t renewals = 0;  // leases extended
    std::uint64_t batches = 0;   // renew() calls
    std::uint64_t failures = 0;  // renewals that could not reach the store (retried)
  };
  Counters counters() const;

 private:
  void run();
  void renew_due(std::vector<std::shared_ptr<HeldLock>>& due);

  LockDriver& driver_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<const HeldLock*, std::shared_ptr<HeldLock>> holds_;  // guarded by mu_
  bool stopping_ = false;                     // guarded by mu_
  // When the thread will next wake by itself; add() wakes it only for a
  // hold due earlier, so an acquire costs no context switch.
  steady::time_point wakes_at_ = steady::time_point::min();  // guarded by mu_
  Counters counters_;                         // guarded by mu_
  std::thread thread_;
};

}  // namespace dlock::detail
