// barrier.h — Barrier on etcd: the layout of etcd's recipes DoubleBarrier,
// so a Go service's DoubleBarrier on <prefix>.barrier/<name> and ours share
// one barrier.
//
//   <prefix>.barrier/<name>/waiters/<uuid>   one key per member that is in,
//                                            on its client's lease (a dead
//                                            member's goes with its lease)
//   <prefix>.barrier/<name>/ready            on no lease: the barrier is open
//
// (<prefix>.barrier/<name>/ is config.h's name_range: a name with '/' is
// <prefix>.barrier.paths/<escaped name>/, so that the members of "a/waiters"
// are not in the waiters/ range of "a".)
// Enter: put our key; then one Txn reads `ready`, the number of members and
// our key. Open if `ready` exists; else if at least `parties` members are
// in, put `ready`, which wakes every other member (each watches `ready`
// from the revision it read).
//
// Leave, in the recipe's order (the members by create revision): the
// lowest keeps its key and waits for the highest's deletion; every other
// member deletes its own and waits for the lowest's. So the lowest goes
// last, alone, and its deletion releases the rest. The last member out
// deletes `ready` with its own key, so the name can be entered again.
#pragma once

#include "backends/etcd/session.h"

#include "core/barrier_driver.h"

namespace dlock::detail::etcd {

class Barriers final : public BarrierDriver {
 public:
  explicit Barriers(Session& session) : session_(session) {}
  Result<std::string> join(const std::string& name, std::chrono::milliseconds lease,
                           steady::time_point deadline) override;
  Result<BarrierCheck> entered(const std::string& name, const std::string& member, int parties, bool watch,
                               steady::time_point deadline) override;
  Result<BarrierCheck> left(const std::string& name, const std::string& member, bool watch,
                            steady::time_point deadline) override;
  void remove(const std::string& name, const std::string& member, steady::time_point deadline) noexcept override;

 private:
  std::string waiters(const std::string& name) const;
  std::string ready(const std::string& name) const;

  Session& session_;
};

}  // namespace dlock::detail::etcd
