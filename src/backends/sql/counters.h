// counters.h — Counter and Latch on the lock table recipe.
//
// Counter: a row of dlock_counts (kind counter), read and written under its
// row lock. Latch: a row of dlock_counts (kind latch) made with its initial
// count; watchers queue under kind latch and are all woken by the
// count-down that reaches 0.
#pragma once

#include "backends/sql/count_rows.h"
#include "core/counter_driver.h"
#include "core/latch_driver.h"

#include <memory>

namespace dlock::detail::sql {

std::unique_ptr<CounterDriver> make_counters(CountRows& rows);
std::unique_ptr<LatchDriver> make_latches(CountRows& rows);

}  // namespace dlock::detail::sql
