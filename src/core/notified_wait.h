// notified_wait.h — the wait loop of Latch and Barrier: check, sleep until
// the store notifies a change (or a safety re-read is due), check again.
#pragma once

#include "core/driver.h"

#include <algorithm>
#include <memory>
#include <thread>

namespace dlock::detail {

// The longest a waiter trusts a notification alone before checking again
// (a safety net: a lost notification costs at most this much delay).
inline constexpr std::chrono::milliseconds reread_interval{500};

// Calls `check(watch)` until it reports done (true) or `deadline` has passed
// (false; a deadline already past still checks once). `check` returns
// something with `done` and `change` (a Waiter it armed, if asked to and not
// done); it is asked to arm one only while none is armed and unfired, so
// re-reads don't pile up notifications on the store. Errors propagate as
// the exceptions `check` and the Waiter throw.
template <class Check>
bool wait_until_done(steady::time_point deadline, Check check) {
  std::unique_ptr<Waiter> change;
  for (;;) {
    // Checking and arming are one step, so a change in between is not missed.
    auto checked = check(!change);
    if (checked.done) return true;
    if (checked.change) change = std::move(checked.change);
    const auto now = steady::now();
    if (now >= deadline) return false;
    const auto until = std::min(deadline, now + reread_interval);
    if (!change) {
      std::this_thread::sleep_until(until);
      continue;
    }
    change->wait_until(until).throw_if_error();
    if (steady::now() < until) change.reset();  // it fired (or the session changed): arm anew
  }
}

}  // namespace dlock::detail
