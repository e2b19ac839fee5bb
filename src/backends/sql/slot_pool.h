// slot_pool.h — the connections of one client of a database server
// (postgres://, mysql://): up to N, opened when first needed, replaced when
// one breaks, each used by one call at a time.
#pragma once

#include "backends/sql/connection.h"
#include "core/driver.h"
#include "core/events.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace dlock::detail::sql {

// A connection a SlotPool keeps.
class PooledConnection : public Connection {
 public:
  // The deadline of the call that uses the connection now.
  virtual void set_deadline(steady::time_point deadline) noexcept = 0;
  // A call failed in a way that leaves the connection unusable (I/O error,
  // deadline passed with a reply outstanding): it must be replaced.
  virtual bool broken() const noexcept = 0;
};

class SlotPool final : public Pool {
 public:
  // Opens a connection by `deadline` (unavailable if it cannot).
  using Open = std::function<Result<std::unique_ptr<PooledConnection>>(steady::time_point deadline)>;

  // `backend` ("postgres") names the connections in errors and events.
  SlotPool(std::string backend, Open open, int size, Events& events);

  // A free connection (opened or replaced if need be), or unavailable if
  // every one stays busy, or none can be opened, before `deadline`.
  Result<Lease> take(std::string_view step, steady::time_point deadline) override;

 private:
  struct Slot {
    std::unique_ptr<PooledConnection> conn;
    bool busy = false;  // guarded by mu_
  };

  void give_back(Connection* c) noexcept override;
  void release(std::size_t index);

  const std::string backend_;
  const Open open_;
  Events& events_;
  std::mutex mu_;
  std::condition_variable free_;
  std::vector<Slot> slots_;  // size fixed; each slot's conn touched only by who has it busy
};

}  // namespace dlock::detail::sql
