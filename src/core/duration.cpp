#include "core/duration.h"

#include <cmath>
#include <cstdio>

namespace dlock::detail {

Result<std::chrono::milliseconds> parse_duration(std::string_view text, std::string_view what) {
  auto fail = [&](std::string why) {
    return Result<std::chrono::milliseconds>(
        errc::invalid_argument, std::string(what) + ": '" + std::string(text) + "' " + why);
  };
  if (text == "0") return std::chrono::milliseconds{0};
  std::size_t i = 0;
  while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
  if (i == 0) return fail("is not a duration (expected a number with a unit: 500ms, 10s, 2m, 1h)");
  std::string number(text.substr(0, i));
  if (number.find('.') != number.rfind('.') || number.front() == '.' || number.back() == '.')
    return fail("has a malformed number");
  std::string_view unit = text.substr(i);
  double scale = 0;  // milliseconds per unit
  if (unit == "ms") scale = 1;
  else if (unit == "s") scale = 1'000;
  else if (unit == "m") scale = 60'000;
  else if (unit == "h") scale = 3'600'000;
  else if (unit.empty()) return fail("needs a unit (ms, s, m or h)");
  else return fail("has an unknown unit '" + std::string(unit) + "' (use ms, s, m or h)");
  // At most 100 years: any longer could not be added to a clock reading
  // (nanoseconds since boot) without overflowing.
  constexpr double max_ms = 100.0 * 365.25 * 24 * 3'600'000;
  double ms = std::strtod(number.c_str(), nullptr) * scale;
  if (!std::isfinite(ms) || ms > max_ms) return fail("is too large (at most 100 years)");
  return std::chrono::milliseconds{static_cast<std::int64_t>(std::llround(ms))};
}

std::string format_duration(std::chrono::nanoseconds d) {
  char buf[64];
  double ns = static_cast<double>(d.count());
  if (ns < 1e3) std::snprintf(buf, sizeof buf, "%.0fns", ns);
  else if (ns < 1e6) std::snprintf(buf, sizeof buf, "%.1fus", ns / 1e3);
  else if (ns < 1e9) std::snprintf(buf, sizeof buf, "%.2fms", ns / 1e6);
  else std::snprintf(buf, sizeof buf, "%.2fs", ns / 1e9);
  return buf;
}

}  // namespace dlock::detail
