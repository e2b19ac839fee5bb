// counters.h — Counter and Latch on etcd: one key each, on no lease, whose
// value is a count in core's encoding (core/cas_counters.h: Curator's 4- or
// 8-byte big-endian integer), changed only by a Txn that compares the key's
// mod revision with the one read, so no update is lost.
//
//   <prefix>.counter/<name>   a Counter; missing: reads as 0, created on first write
//   <prefix>.latch/<name>     a Latch (4 bytes); created by its first user with its count
//
// A latch waiter watches its key from the revision it read on: any later
// put wakes it to read again.
#pragma once

#include "backends/etcd/session.h"

#include "core/cas_counters.h"
#include "core/latch_driver.h"

#include <string>

namespace dlock::detail::etcd {

// The count keys under one root (kind_root of "counter" or "latch").
class CountKeys final : public CountCells {
 public:
  CountKeys(Session& session, std::string root) : session_(session), root_(std::move(root)) {}
  std::string key(const std::string& name) const { return root_ + name; }
  Result<CountCell> read_cell(const std::string& name, steady::time_point deadline, std::string_view step) override;
  Result<bool> write_cell(const std::string& name, const CountCell& seen, const std::string& bytes,
                          steady::time_point deadline, std::string_view step) override;

 private:
  Session& session_;
  std::string root_;
};

class Latches final : public LatchDriver {
 public:
  explicit Latches(Session& session);
  Result<LatchRead> read(const std::string& name, std::int64_t initial, bool watch,
                         steady::time_point deadline) override;
  Result<std::int64_t> count_down(const std::string& name, std::int64_t initial, std::int64_t n,
                                  steady::time_point deadline) override;

 private:
  Session& session_;
  CountKeys keys_;
};

}  // namespace dlock::detail::etcd
