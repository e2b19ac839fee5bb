// count_value.h — the range rules of a Counter's (and a Latch's) value,
// the same on every store: a 4-byte counter holds an int32, an 8-byte one
// an int64, and an addition that overflows 64 bits is refused.
#pragma once

#include <dlock/status.h>

#include <cstdint>
#include <string_view>

namespace dlock::detail {

// ok if `value` fits a counter `width_bytes` (4 or 8) wide; else
// invalid_argument, the message starting with `what` (e.g. "store: value").
Status check_count_fits(std::int64_t value, int width_bytes, std::string_view what);

// before + delta for fetch_add on counter `name`; invalid_argument if the
// sum does not fit in an int64 (the counter's own width is check_count_fits').
Result<std::int64_t> count_sum(std::string_view name, std::int64_t before, std::int64_t delta);

}  // namespace dlock::detail
