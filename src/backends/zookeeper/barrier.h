// barrier.h — Barrier on ZooKeeper: the protocol of Apache Curator's
// DistributedDoubleBarrier, so Java members and ours share one barrier.
//
//   <root>/<name>          a container, made with the first member
//   <root>/<name>/<uuid>   one ephemeral node per member that is in (the
//                          uuid in java.util.UUID's text form)
//   <root>/<name>/ready    persistent: the barrier is open
//
// Enter: make our node; then watch for `ready` (an exists watch, which also
// fires on its creation) and list the members, sent back to back. Open if
// `ready` exists; else if at least `parties` members are in, make `ready`:
// its creation is what wakes every other member.
//
// Leave, in Curator's order (the members sorted by name): the lowest keeps
// its node and waits for the highest to go; every other member deletes its
// own and waits for the lowest. So the lowest goes last, when it is alone,
// and its deletion releases the rest. When no member is left, `ready` is
// deleted, so the name can be entered again.
#pragma once

#include "backends/zookeeper/session.h"
#include "core/barrier_driver.h"

namespace dlock::detail::zookeeper {

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
  Session& session_;
};

}  // namespace dlock::detail::zookeeper
