// duration.h — human durations: "250ms", "10s", "2m", "1h", "0".
#pragma once

#include <dlock/status.h>

#include <chrono>
#include <string>
#include <string_view>

namespace dlock::detail {

// A non-negative duration with a unit suffix (ms, s, m, h); "0" alone
// needs none. Fractions like "1.5s" are accepted. `what` names the argument
// in the error message.
Result<std::chrono::milliseconds> parse_duration(std::string_view text, std::string_view what);

// "1.5s", "250ms", ... for display.
std::string format_duration(std::chrono::nanoseconds d);

}  // namespace dlock::detail
