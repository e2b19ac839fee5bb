// semaphore_driver.h — the seam for Semaphore: taking and giving back one
// permit. How a store bounds the permits out (a queue of takers, a count)
// is the driver's; core keeps which permits a handle holds and turns
// results into the std-shaped API.
#pragma once

#include "core/driver.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

namespace dlock::detail {

// One permit held.
struct Permit {
  std::uint64_t token = 0;  // strictly increasing across the permits of one name
  std::unique_ptr<GrantState> state;
  // Fires when the store drops the permit by itself (its session was lost).
  std::stop_token dropped;
};

class SemaphoreDriver {
 public:
  virtual ~SemaphoreDriver() = default;
  // Takes one of the `permits` permits of `name` for `owner` (as in
  // LockRequest), waiting for one to come back until `deadline` (now: one
  // attempt); nullopt if none did. Each remote step is bounded by
  // op_timeout, whatever `deadline` is. `options` (lease, lease_mode,
  // renew_interval, fair) apply on stores that lease permits.
  virtual Result<std::optional<Permit>> acquire(const std::string& name, std::int32_t permits,
                                                const std::string& owner, const MutexOptions& options,
                                                steady::time_point deadline) = 0;
  // Gives the permit back; lock_lost if it was no longer ours.
  virtual Status release(const std::string& name, Permit& permit) = 0;
  // Permits out now, held by anyone.
  virtual Result<std::int64_t> in_use(const std::string& name) = 0;
  // Whether `permit`'s lease has run out as far as this process can tell
  // without asking the store (a holder that was stopped past its lease
  // learns it the moment it runs again, before any renewal). Local, cheap,
  // runs no callbacks. Stores whose permits live as long as a session: false.
  virtual bool lease_over(const Permit& permit) const {
    (void)permit;
    return false;
  }
};

}  // namespace dlock::detail
