#include "core/option_values.h"

#include "core/duration.h"

#include <charconv>
#include <string>

namespace dlock::detail {

Result<int> parse_count(std::string_view text, std::string_view what, int lo, int hi) {
  int value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || ptr != text.data() + text.size() || value < lo || value > hi)
    return Status(errc::invalid_argument, std::string(what) + " '" + std::string(text) +
                                              "' must be a whole number from " + std::to_string(lo) + " to " +
                                              std::to_string(hi));
  return value;
}

Result<std::chrono::milliseconds> parse_duration_within(std::string_view text, std::string_view what,
                                                        std::chrono::milliseconds lo, std::chrono::milliseconds hi) {
  auto d = parse_duration(text, what);
  if (!d) return d.status();
  if (*d < lo || *d > hi)
    return Status(errc::invalid_argument, std::string(what) + " '" + std::string(text) + "' must be from " +
                                              format_duration(lo) + " to " + format_duration(hi));
  return *d;
}

}  // namespace dlock::detail
