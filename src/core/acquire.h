// acquire.h — the one acquire loop every backend and primitive uses.
#pragma once

#include "core/driver.h"

#include <optional>

namespace dlock::detail {

// Tries to take the lock until `deadline`: one attempt, then (if busy)
// subscribe to the backend's notification and wait for it — or, on a
// backend without notifications, back off with jitter — and try again.
// Always makes at least one attempt. nullopt: not acquired by the deadline.
// An error (e.g. unavailable) ends the loop at once.
Result<std::optional<Grant>> acquire(LockDriver& driver, const LockRequest& request,
                                     steady::time_point deadline, const ClientOptions& options);

}  // namespace dlock::detail
