// connection.h — one libpq connection, driven without blocking so every
// call ends by its deadline, with the recipe's statements prepared on it
// and batches sent as one pipeline (one round trip per batch).
#pragma once

#include "backends/postgres/config.h"
#include "backends/sql/slot_pool.h"
#include "core/driver.h"

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

struct pg_conn;
struct pg_result;

namespace dlock::detail::postgres {

class PgConnection final : public sql::PooledConnection {
 public:
  // Connects by `deadline`; with `dialect`, prepares its statements and
  // enters pipeline mode (a pool's connection), else stays plain (the
  // listener's).
  static Result<std::unique_ptr<PgConnection>> open(const ConnectInfo& info, const sql::Dialect* dialect,
                                                    steady::time_point deadline);
  ~PgConnection() override;
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  void set_deadline(steady::time_point deadline) noexcept override { deadline_ = deadline; }
  bool broken() const noexcept override { return broken_; }

  // Runs SQL text with no parameters (several statements allowed), outside
  // any pipeline. The last statement's rows; `sqlstate` (if given) receives
  // a failure's SQLSTATE.
  Result<sql::Rows> exec(const std::string& text, std::string_view step, std::string* sqlstate = nullptr);

  // One statement with text parameters ($1, $2, ...), outside any pipeline.
  // `sqlstate` (if given) receives a failure's SQLSTATE.
  Result<sql::Rows> query(const std::string& text, std::span<const std::string> params, std::string_view step,
                          std::string* sqlstate = nullptr);

  // query(), for the statements a plain connection sends again and again:
  // `text` (a constant: it is known by its address) is prepared on this
  // connection the first time it is sent (one more round trip) and bound
  // after that, with no parse or plan per call.
  Result<sql::Rows> query_prepared(const char* text, std::span<const std::string> params, std::string_view step,
                                   std::string* sqlstate = nullptr);
  // Prepares `text` (a constant) for query_prepared() now, if it is not yet.
  Status prepare_plain(const char* text, std::string_view step);
  // query_prepared() without waiting: `answer` gets its rows when they are
  // read — by the next call on this connection, or read_unanswered().
  void query_prepared_async(const char* text, std::span<const std::string> params, std::string step,
                            std::function<void(Result<sql::Rows>)> answer);

  // The listener's side: waits until notifications or `until`; calls
  // `each(payload)` for every one. unavailable if the connection failed.
  Status wait_notifications(steady::time_point until, int stop_fd, bool& stopped,
                            const std::function<void(std::string_view)>& each);

 private:
  PgConnection(pg_conn* conn, std::string redacted_url) : conn_(conn), redacted_url_(std::move(redacted_url)) {}
  // The pool's side (sql::PooledConnection): batches in one pipeline, each
  // ended by a sync, so a batch may go out before the results of earlier ones.
  Status write(std::span<const sql::Call> calls) override;
  Result<std::vector<sql::Rows>> read(std::span<const sql::Stmt> statements) override;
  bool pipelines() const noexcept override { return true; }
  bool failed_in_aborted_transaction() const noexcept override { return aborted_before_; }
  void end_failed_transaction() override;
  Status prepare(const sql::Dialect& dialect);
  // Waits for the socket (POLLIN, and POLLOUT if `write`) until the deadline.
  Status wait_socket(bool write, std::string_view step);
  Status flush(std::string_view step);
  // Reads the results of a plain (not pipelined) query: the last one's rows.
  Result<sql::Rows> finish_plain(std::string_view step, std::string* sqlstate);
  Result<sql::Rows> read_plain(std::string_view step, std::string* sqlstate);  // finish_plain(), written already
  // Sends query_prepared()'s query: prepared first if need be and
  // `may_prepare`, else as it is until it has been prepared.
  Status send_prepared(const char* text, std::span<const std::string> params, std::string_view step,
                       std::string* sqlstate, bool may_prepare);
  // The next result (nullptr between a query's results), by the deadline.
  Result<::pg_result*> next_result(std::string_view step);
  Status fail(std::string_view step, std::string why);

  pg_conn* conn_;
  std::string redacted_url_;
  steady::time_point deadline_{};
  bool broken_ = false;
  bool aborted_before_ = false;     // the last read() failed with 25P02 (in_failed_sql_transaction)
  std::vector<std::string> names_;  // prepared statement per sql::Stmt
  std::unordered_map<const char*, std::string> plain_names_;  // query_prepared's: text -> name
};

}  // namespace dlock::detail::postgres
