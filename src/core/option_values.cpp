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

namespace {

// A bound as a user would write it: "500ms", "1s", "10m", "1h".
std::string bound_text(std::chrono::milliseconds d) {
  const auto ms = d.count();
  if (ms != 0 && ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms != 0 && ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms != 0 && ms % 1'000 == 0) return std::to_string(ms / 1'000) + "s";
  return std::to_string(ms) + "ms";
}

}  // namespace

Result<std::chrono::milliseconds> parse_duration_within(std::string_view text, std::string_view what,
                                                        std::chrono::milliseconds lo, std::chrono::milliseconds hi) {
  auto d = parse_duration(text, what);
  if (!d) return d.status();
  if (*d < lo || *d > hi)
    return Status(errc::invalid_argument, std::string(what) + " '" + std::string(text) + "' must be from " +
                                              bound_text(lo) + " to " + bound_text(hi));
  return *d;
}

}  // namespace dlock::detail
