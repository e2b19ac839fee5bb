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
};

// `wakeups` may be null: waiters then poll (no queue, no fair mode).
// `mailbox` receives this client's wake-ups (from `wakeups`' receiver).
std::unique_ptr<Backend> make_table_backend(std::unique_ptr<Pool> pool, std::shared_ptr<const Dialect> dialect,
                                            std::shared_ptr<Mailbox> mailbox, std::shared_ptr<Wakeups> wakeups,
                                            TableConfig config);

// "host <hostname> pid <pid>" for TableConfig::holder_info.
std::string this_process();

}  // namespace dlock::detail::sql
