// latch_driver.h — the seam for Latch: the remote steps of a count that
// only goes down. Core owns the wait loop (deadlines, re-reads); a driver
// reads, counts down and arms a notification. Every call returns by
// `deadline` (errc::unavailable otherwise).
#pragma once

#include "core/driver.h"

#include <cstdint>
#include <memory>
#include <string>

namespace dlock::detail {

// The count as read, and (if asked for and the count was above 0) a Waiter
// woken when it may have changed since that read.
struct LatchRead {
  std::int64_t remaining = 0;
  std::unique_ptr<Waiter> change;
};

class LatchDriver {
 public:
  virtual ~LatchDriver() = default;
  // Every call below first creates the latch with `initial` if it does not
  // exist; an existing latch keeps its count.
  virtual Result<LatchRead> read(const std::string& name, std::int64_t initial, bool watch,
                                 steady::time_point deadline) = 0;
  // Subtracts n (>= 0) atomically, never going below 0; the count after.
  virtual Result<std::int64_t> count_down(const std::string& name, std::int64_t initial, std::int64_t n,
                                          steady::time_point deadline) = 0;
};

}  // namespace dlock::detail
