// option_values.h — checked values of URL options (?pool=4&waiter_ttl=2s),
// the same rules and words on every backend. Errors name the option and the
// range; the caller adds which URL.
#pragma once

#include <dlock/status.h>

#include <chrono>
#include <string_view>

namespace dlock::detail {

// A whole number from lo to hi.
Result<int> parse_count(std::string_view text, std::string_view what, int lo, int hi);

// A duration (duration.h) from lo to hi.
Result<std::chrono::milliseconds> parse_duration_within(std::string_view text, std::string_view what,
                                                        std::chrono::milliseconds lo, std::chrono::milliseconds hi);

}  // namespace dlock::detail
