#include "core/count_value.h"

#include <limits>
#include <string>

namespace dlock::detail {

Status check_count_fits(std::int64_t value, int width_bytes, std::string_view what) {
  if (width_bytes == 4 &&
      (value < std::numeric_limits<std::int32_t>::min() || value > std::numeric_limits<std::int32_t>::max()))
    return Status(errc::invalid_argument,
                  std::string(what) + " " + std::to_string(value) +
                      " does not fit in 32 bits: this counter is stored as Apache Curator's SharedCount is (a "
                      "4-byte int, so that Java clients on zk:// read the same value); a counter created with "
                      "CounterWidth::int64 holds 64 bits");
  return {};
}

Result<std::int64_t> count_sum(std::string_view name, std::int64_t before, std::int64_t delta) {
  std::int64_t sum;
  if (__builtin_add_overflow(before, delta, &sum))
    return Status(errc::invalid_argument, "fetch_add on counter '" + std::string(name) + "': " +
                                              std::to_string(before) + " + " + std::to_string(delta) +
                                              " overflows 64 bits");
  return sum;
}

}  // namespace dlock::detail
