// barrier_driver.h — the seam for Barrier: the remote steps of a double
// barrier. Core owns the member's state and the wait loops (deadlines,
// re-reads); a driver adds and removes a member's entry, and says whether
// the barrier is open (enter) or empty (leave), arming a notification when
// it is not yet. Every call returns by `deadline` (errc::unavailable otherwise).
#pragma once

#include "core/driver.h"

#include <memory>
#include <string>

namespace dlock::detail {

// Whether a member may go on, and if not (and a watch was asked for) a
// Waiter woken when that may have changed.
struct BarrierCheck {
  bool done = false;
  std::unique_ptr<Waiter> change;
};

class BarrierDriver {
 public:
  virtual ~BarrierDriver() = default;
  // Adds a member to the barrier `name`: an entry that lives as long as the
  // session, or (leased_members()) for `lease` from when the call was sent.
  // Returns the member's id (unique per call).
  virtual Result<std::string> join(const std::string& name, std::chrono::milliseconds lease,
                                   steady::time_point deadline) = 0;
  // true: a member's entry expires unless renewed. Core then keeps it alive
  // through the lease keeper, as LockDriver::renew of a LockRequest{name,
  // owner = member id, lease, watchdog, kind = LockKind::member}; a refused
  // renewal means the member is out. LockDriver::release is never called
  // for members: remove() takes them out.
  virtual bool leased_members() const { return false; }
  // Enter: whether the barrier is open — it was opened, or `parties` members
  // are in now (then it is opened for every member). lock_lost if `member`'s
  // entry is gone (its session expired) and the barrier is not open.
  virtual Result<BarrierCheck> entered(const std::string& name, const std::string& member, int parties, bool watch,
                                       steady::time_point deadline) = 0;
  // Leave: one step of leaving (it may remove `member`'s entry); done once
  // no member is left. Not done and `watch`: a Waiter.
  virtual Result<BarrierCheck> left(const std::string& name, const std::string& member, bool watch,
                                    steady::time_point deadline) = 0;
  // Removes `member`'s entry: by `deadline` if the store answers, else as
  // soon as it does. Never fails.
  virtual void remove(const std::string& name, const std::string& member, steady::time_point deadline) noexcept = 0;
};

}  // namespace dlock::detail
