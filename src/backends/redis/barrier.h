// barrier.h — the double barrier on redis:// (the rest of the layout: redis_backend.cpp):
//   <prefix>{<name>}:barrier           hash  open  while this round is open
//   <prefix>{<name>}:barrier:members   zset  member id -> lease end (server ms)
//   <prefix>{<name>}:barrier:left      set   members that have called leave
//   <prefix>{<name>}:barrier:watchers  zset  watcher entry -> deadline
// Members are leased (BarrierDriver::leased_members): the client's lease
// keeper renews them with the locks, and a member that stops renewing is
// dropped, so a dead member never counts. The member that fills the
// barrier opens it and wakes every watcher; the last live member to leave
// deletes the round's keys and wakes the rest.
#pragma once

#include "backends/redis/store.h"
#include "core/barrier_driver.h"

#include <memory>

namespace dlock::detail::redis {

std::unique_ptr<BarrierDriver> make_barriers(const Store& store);

}  // namespace dlock::detail::redis
