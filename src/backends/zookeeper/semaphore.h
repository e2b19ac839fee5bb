// semaphore.h — Semaphore on ZooKeeper: Apache Curator's
// InterProcessSemaphoreV2 layout, so Curator and dlock takers share one
// semaphore (and with one permit, Curator's InterProcessSemaphoreMutex).
//
//   <root>/<name>/locks/_c_<uuid>-lock-<seq>    a mutex (the InterProcessMutex
//                                               layout) held while taking a permit
//   <root>/<name>/leases/_c_<uuid>-lease-<seq>  one ephemeral sequential node
//                                               per permit out
//
// Taking a permit: hold the mutex, create our lease node, then list the
// leases with a watch; at most `permits` nodes (ours among them): it is
// ours. More: wait for a lease to go (the watch) and count again — still
// holding the mutex, so takers are served one at a time in the mutex's
// order. A taker that gives up deletes its lease node. The mutex is
// released once the permit is ours or given up. A permit is given back by
// deleting its node; a dead holder's node goes with its session.
//
// Token: the lease node's creation zxid. A permit is only granted once
// fewer than `permits` earlier leases remain, so among holders of one name
// a later grant always has a later node.
#pragma once

#include "backends/zookeeper/session.h"
#include "core/semaphore_driver.h"

#include <dlock/options.h>
#include <stop_token>

namespace dlock::detail::zookeeper {

class Semaphores final : public SemaphoreDriver {
 public:
  // `locks`: the backend's own mutex, taken on <name>/locks.
  Semaphores(Session& session, LockDriver& locks) : session_(session), locks_(locks) {}
  // `options` are not used: the session is every permit's lease.
  Result<std::optional<Permit>> acquire(const std::string& name, std::int32_t permits, const std::string& owner,
                                        const MutexOptions& options, steady::time_point deadline) override;
  Status release(const std::string& name, Permit& permit) override;
  Result<std::int64_t> in_use(const std::string& name) override;

 private:
  // Holding the mutex (`mutex_dropped` fires if the session loses it):
  // creates our lease node and waits until it is among the first `permits`.
  Result<std::optional<Permit>> take_lease(const std::string& name, std::int32_t permits,
                                           steady::time_point deadline, const std::stop_token& mutex_dropped);

  Session& session_;
  LockDriver& locks_;
};

}  // namespace dlock::detail::zookeeper
