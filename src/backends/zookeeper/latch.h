// latch.h — Latch on ZooKeeper: the remaining count in one persistent node
// (counter.h's encoding), counted down by compare-and-set, never below 0.
// Waiters read it with a data watch and are woken by the next change.
#pragma once

#include "backends/zookeeper/counter.h"
#include "backends/zookeeper/session.h"
#include "core/latch_driver.h"

namespace dlock::detail::zookeeper {

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
