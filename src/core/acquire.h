// acquire.h — the one acquire loop every backend and primitive uses.
#pragma once

#include "core/driver.h"

#include <atomic>
#include <cstdint>
#include <optional>

namespace dlock::detail {

// Tries to take the lock until `deadline`: one attempt, then (if busy)
// subscribe to the backend's notification and wait for it — or, on a
// backend without notifications, back off with jitter — and try again.
// Always makes at least one attempt. nullopt: not acquired by the deadline.
// An error (e.g. unavailable) ends the loop at once. Adds to `wakeups` each
// wait that ended before its retry time (a notification woke it, or a
// spurious wake-up did): what a herd of woken waiters would show; and to
// `waits` (if given) one if the first attempt found the lock busy and the
// loop went on to wait.
Result<std::optional<Grant>> acquire(LockDriver& driver, const LockRequest& request,
                                     steady::time_point deadline, const ClientOptions& options,
                                     std::atomic<std::uint64_t>& wakeups,
                                     std::atomic<std::uint64_t>* waits = nullptr);

}  // namespace dlock::detail
