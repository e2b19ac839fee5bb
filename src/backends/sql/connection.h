// connection.h — what the table recipe needs from a database client.
//
// The recipe (table_backend.cpp) is written once against this interface;
// each database (sqlite, postgres, ...) implements it over its own client
// library and supplies its SQL through a Dialect. A call is a batch of
// statements sent together where the client can pipeline them (PostgreSQL)
// and run one after the other where it cannot (SQLite): the recipe never
// needs an answer in the middle of a batch.
#pragma once

#include "backends/sql/dialect.h"
#include "core/driver.h"

#include <dlock/status.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace dlock::detail::sql {

// A statement's parameter: ?1, ?2, ... in the dialect's texts.
using Param = std::variant<std::int64_t, std::string_view>;

// One statement of a batch: which, and its parameters (viewed: they must
// outlive the call).
struct Call {
  Stmt statement;
  std::vector<Param> params = {};
};

// What one statement returned: rows of text cells (NULL is nullopt).
class Rows {
 public:
  using Row = std::vector<std::optional<std::string>>;

  void add(Row row) { rows_.push_back(std::move(row)); }
  std::size_t size() const noexcept { return rows_.size(); }
  bool empty() const noexcept { return rows_.empty(); }
  // Rows changed by an INSERT/UPDATE/DELETE without RETURNING.
  std::int64_t changed = 0;

  // The cell's text ("" for NULL).
  std::string_view text(std::size_t row, std::size_t column) const;
  // The cell as an integer; 0 for NULL or text that is not one.
  std::int64_t integer(std::size_t row, std::size_t column) const;

 private:
  std::vector<Row> rows_;
};

// Where the results of a batch sent without waiting go, once read.
using Answer = std::function<void(Result<std::vector<Rows>>)>;

// One connection, used by one call at a time.
class Connection {
 public:
  virtual ~Connection() = default;
  // Runs `calls` in order and returns one Rows per call, or the first
  // error (the batch stops there; an open transaction is then rolled back
  // by the connection before it returns). Bounded by the deadline the
  // connection was taken with.
  virtual Result<std::vector<Rows>> run(std::span<const Call> calls) = 0;

  // Whether send() works here: the database runs a connection's batches in
  // the order they are sent, so a batch sent later on it (run() or send())
  // runs after one sent without waiting.
  virtual bool sends_without_waiting() const noexcept { return false; }
  // Sends `calls` and returns without their results: `answer` gets them
  // (or the failure) when they are read — before the result of the next
  // batch on this connection, or by its pool's flush(). It runs on that
  // reader's thread with no lock of the pool held; it must not block or
  // use the pool. Only where sends_without_waiting().
  virtual void send(std::span<const Call> calls, Answer answer) {
    (void)calls;
    answer(Status(errc::internal, "this connection cannot send without waiting"));
  }
};

// The connections of one client. A call takes one for its duration.
class Pool {
 public:
  virtual ~Pool() = default;

  struct Give {
    Pool* pool;
    void operator()(Connection* c) const { pool->give_back(c); }
  };
  using Lease = std::unique_ptr<Connection, Give>;

  // A connection for `step` (named in errors) whose calls end by
  // `deadline`, or unavailable if none is free or can be made by then.
  virtual Result<Lease> take(std::string_view step, steady::time_point deadline) = 0;

  // Reads the results of every batch send() left unread, by `deadline`
  // (those unread then fail): before the pool's users go.
  virtual void flush(steady::time_point deadline) { (void)deadline; }

 protected:
  virtual void give_back(Connection* c) noexcept = 0;
};

}  // namespace dlock::detail::sql
