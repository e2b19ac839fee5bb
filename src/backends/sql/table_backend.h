// table_backend.h — the lock table recipe, once for every SQL database.
//
// A database backend (sqlite://, postgres://) opens its connections, makes
// a Pool of them and a Dialect of its SQL, and gets every lock primitive
// the recipe has: Mutex (fair or starvation-bounded), SharedMutex,
// Semaphore (leased permits); Election next. See table_backend.cpp.
#pragma once

#include "backends/sql/connection.h"
#include "backends/sql/dialect.h"
#include "backends/sql/wakeups.h"
#include "core/driver.h"

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace dlock::detail::sql {

struct TableConfig {
  std::chrono::milliseconds op_timeout{};
  // How long a queued waiter's entry lives without an attempt refreshing
  // it (core attempts at least every 500 ms while waiting): a dead waiter
  // holds back a fair queue for at most this long.
  std::chrono::milliseconds waiter_ttl{2'000};
  // Stored with each hold for `dlock status`: "host H pid P".
  std::string holder_info;
  // Without wake-ups: the longest pause between a waiter's attempts
  // (ClientOptions::max_backoff); the pauses start at 1 ms, with jitter.
  std::chrono::milliseconds max_backoff{100};
};

// What a database backend brings to the recipe. `wakeups` may be null:
// waiters then poll with backoff, each attempt keeping their place in the
// queue (so fair mode and max_barging_wait still hold, at polling speed).
struct Parts {
  std::unique_ptr<Pool> pool;
  std::shared_ptr<Wakeups> wakeups;
};

// Makes the backend; `make_parts` makes its connections and wake-ups, which
// report connections lost and restored to the backend's Events. `mailbox`
// receives this client's wake-ups (from the wake-ups' receiver).
Result<std::unique_ptr<Backend>> make_table_backend(std::shared_ptr<const Dialect> dialect,
                                                    std::shared_ptr<Mailbox> mailbox, TableConfig config,
                                                    const std::function<Result<Parts>(Events&)>& make_parts);

// "host <hostname> pid <pid>" for TableConfig::holder_info.
std::string this_process();

}  // namespace dlock::detail::sql
