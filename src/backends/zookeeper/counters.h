// counters.h — Counter and Latch on ZooKeeper: one persistent node whose data
// is a count in one of Apache Curator's encodings, changed only by
// compare-and-set on the node's version (the loops are core's:
// core/cas_counters.h; this is the node's two remote steps).
//
//   <root>/<name>    data: a big-endian signed integer, 4 bytes
//                    (SharedCount's int) or 8 bytes (DistributedAtomicLong's
//                    long); a node with no data reads as 0; missing: the
//                    counter reads as 0 and is created on first write
//
// A node keeps the width it was created with: every write encodes in the
// width read (a missing node: the width asked for).
//
// Every change is read-then-set with the version read (zoo_aset): if anyone
// wrote in between, ZooKeeper answers ZBADVERSION and we read again, so no
// update is lost, until the call's deadline.
//
// A Latch is the remaining count in one such node, counted down by
// compare-and-set, never below 0; waiters read it with a data watch and are
// woken by the next change.
#pragma once

#include "backends/zookeeper/session.h"
#include "core/cas_counters.h"
#include "core/latch_driver.h"

#include <memory>
#include <string>

namespace dlock::detail::zookeeper {

class CountNodes final : public CountCells {
 public:
  explicit CountNodes(Session& session) : session_(session) {}
  Result<CountCell> read_cell(const std::string& name, steady::time_point deadline, std::string_view step) override {
    return read(name, deadline, step, nullptr);
  }
  // The node's value and version; with `watch`, the read also leaves a
  // one-shot data watch that notifies it.
  Result<CountCell> read(const std::string& name, steady::time_point deadline, std::string_view step,
                         const std::shared_ptr<Signal>& watch);
  // A missing node is created, parents as needed.
  Result<bool> write_cell(const std::string& name, const CountCell& seen, const std::string& bytes,
                          steady::time_point deadline, std::string_view step) override;

 private:
  Session& session_;
};

class Latches final : public LatchDriver {
 public:
  explicit Latches(Session& session) : session_(session), nodes_(session) {}
  Result<LatchRead> read(const std::string& name, std::int64_t initial, bool watch,
                         steady::time_point deadline) override;
  Result<std::int64_t> count_down(const std::string& name, std::int64_t initial, std::int64_t n,
                                  steady::time_point deadline) override;

 private:
  Session& session_;
  CountNodes nodes_;
};

}  // namespace dlock::detail::zookeeper
