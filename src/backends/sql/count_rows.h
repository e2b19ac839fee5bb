// count_rows.h — the seam between the table backend (table_backend.cpp)
// and the recipe's Counter, Latch (counters.h) and Barrier (barrier.h): a
// transaction on one row of dlock_counts, a watcher woken when it changes,
// and one batch on a pooled connection.
#pragma once

#include "backends/sql/connection.h"
#include "core/driver.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::detail::sql {

// A live hold or queue entry, as the recipe's statements return them.
struct Row {
  std::string owner;
  std::string mode;
  std::int64_t a = 0;  // holders: token; waiters: ms waited
  std::int64_t left = 0;
};

// The rows whose lease (or liveness) has time left.
inline std::vector<Row> live_rows(const Rows& rows) {
  std::vector<Row> out;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    Row r{std::string(rows.text(i, 0)), std::string(rows.text(i, 1)), rows.integer(i, 2), rows.integer(i, 3)};
    if (r.left > 0) out.push_back(std::move(r));
  }
  return out;
}

// The kind column of a count row, and of a barrier's members' holds.
inline constexpr std::string_view kind_counter = "counter", kind_latch = "latch", kind_barrier = "barrier",
                                  kind_member = "member";

class CountRows {
 public:
  using Decide = std::function<Status(std::int64_t value, int width, std::vector<Call>& writes)>;
  using Then = std::function<void(const std::vector<Row>& rows, std::vector<Call>& writes)>;

  // One transaction on the count row `name`/`kind` (made with `initial`,
  // `width` bytes wide, if missing): `decide(value, width, writes)` adds
  // the writes, or refuses (then nothing is changed); if `then` is given,
  // the writes run first and `then(live rows of the last one, more)` adds
  // more (a barrier's members, read under the row lock). Wakes what it
  // queued wake-ups for once committed.
  virtual Status under_count(const std::string& step, const std::string& name, std::string_view kind,
                             std::int64_t initial, std::int64_t width, steady::time_point deadline,
                             const Decide& decide, const Then& then = nullptr) = 0;

  // Queues a watcher of `name`/`kind` (in `writes`) and its Waiter; null
  // without wake-ups. A watcher's entry outlives long waits (re-reads do
  // not refresh it).
  virtual std::unique_ptr<Waiter> watcher(const std::string& name, std::string_view kind,
                                          std::vector<Call>& writes) = 0;

  // Runs `calls` on a pooled connection taken by `deadline`.
  virtual Result<std::vector<Rows>> run(std::string_view step, steady::time_point deadline,
                                        std::span<const Call> calls) = 0;

  // Who holds, for dlock status (TableConfig::holder_info).
  virtual const std::string& holder_info() const = 0;

  // Wakes every watcher of `name`/`kind` (in `writes`: found under the lock).
  static void wake_watchers(const std::string& name, std::string_view kind, std::vector<Call>& writes) {
    writes.push_back({Stmt::heads, {name, kind, std::int64_t{1000}}});
  }

 protected:
  ~CountRows() = default;
};

}  // namespace dlock::detail::sql
