// counter_driver.h — the seam for Counter: the remote steps of a shared
// integer. Core checks names and turns results into the std-shaped API.
// Every call returns by `deadline` (errc::unavailable otherwise).
#pragma once

#include "core/driver.h"

#include <cstdint>
#include <string>

namespace dlock::detail {

class CounterDriver {
 public:
  virtual ~CounterDriver() = default;
  // The value; a counter never written reads as 0.
  virtual Result<std::int64_t> load(const std::string& name, steady::time_point deadline) = 0;
  // The writes below create a missing counter with `width`; an existing
  // one keeps its own.
  virtual Status store(const std::string& name, std::int64_t value, CounterWidth width,
                       steady::time_point deadline) = 0;
  // Adds atomically; the value before.
  virtual Result<std::int64_t> fetch_add(const std::string& name, std::int64_t delta, CounterWidth width,
                                         steady::time_point deadline) = 0;
  // Sets `desired` if the value is `expected` (true); else false and
  // `expected` is the value seen. Never fails spuriously.
  virtual Result<bool> compare_exchange(const std::string& name, std::int64_t& expected, std::int64_t desired,
                                        CounterWidth width, steady::time_point deadline) = 0;
};

}  // namespace dlock::detail
