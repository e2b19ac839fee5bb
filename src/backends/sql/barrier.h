// barrier.h — the double barrier on the lock table recipe.
//
// Members are leased holds of kind member (renewed with the client's
// locks, so a dead member stops counting); whether the barrier is open is a
// row of dlock_counts (kind barrier). Watchers queue under kind barrier and
// are all woken when it opens and when it empties.
#pragma once

#include "backends/sql/count_rows.h"
#include "core/barrier_driver.h"

#include <memory>

namespace dlock::detail::sql {

std::unique_ptr<BarrierDriver> make_barriers(CountRows& rows);

}  // namespace dlock::detail::sql
