// counters.h — Counter and Latch on redis:// (the rest of the layout: redis_backend.cpp):
//   <prefix>{<name>}:counter         hash  value (decimal int64), width ("4" or "8")
//   <prefix>{<name>}:latch           hash  count
//   <prefix>{<name>}:latch:watchers  zset  watcher entry -> deadline (server ms)
// Both persist until deleted (as ZooKeeper's nodes do). Arithmetic is the
// server's own 64-bit integer arithmetic (HINCRBY) or a string comparison,
// never Lua's doubles. A count-down that reaches 0 sends one message to
// each watcher, which is every waiter that can proceed.
#pragma once

#include "backends/redis/store.h"
#include "core/counter_driver.h"
#include "core/latch_driver.h"

#include <memory>

namespace dlock::detail::redis {

std::unique_ptr<CounterDriver> make_counters(const Store& store);
std::unique_ptr<LatchDriver> make_latches(const Store& store);

}  // namespace dlock::detail::redis
