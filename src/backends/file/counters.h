// counters.h — Counter and Latch on file://: one file per name (.count), a
// CountRecord read and rewritten under the file's guard lock, so every
// change is atomic across processes. A counter keeps the width it was
// created with (4 or 8 bytes, stored with the value). A Latch is the
// counter of the same name (as on zk://): its count, created by the first
// handle with its initial count; waiters are woken by inotify when the file
// is written.
#pragma once

#include "backends/file/directory.h"
#include "core/counter_driver.h"
#include "core/latch_driver.h"

namespace dlock::detail::file {

class Counters final : public CounterDriver, public LatchDriver {
 public:
  explicit Counters(const Directory& dir) : dir_(dir) {}

  Result<std::int64_t> load(const std::string& name, steady::time_point deadline) override;
  Status store(const std::string& name, std::int64_t value, CounterWidth width, steady::time_point deadline) override;
  Result<std::int64_t> fetch_add(const std::string& name, std::int64_t delta, CounterWidth width,
                                 steady::time_point deadline) override;
  Result<bool> compare_exchange(const std::string& name, std::int64_t& expected, std::int64_t desired,
                                CounterWidth width, steady::time_point deadline) override;

  Result<LatchRead> read(const std::string& name, std::int64_t initial, bool watch,
                         steady::time_point deadline) override;
  Result<std::int64_t> count_down(const std::string& name, std::int64_t initial, std::int64_t n,
                                  steady::time_point deadline) override;

 private:
  const Directory& dir_;
};

}  // namespace dlock::detail::file
