// connection.h — one MariaDB Connector/C connection, driven through the
// library's non-blocking API so every call ends by its deadline. A batch
// is sent as one multi-statement text (one round trip), its parameters
// written into it as literals: numbers in decimal, texts in hex (X'..',
// byte for byte, nothing to escape).
#pragma once

#include "backends/mysql/config.h"
#include "backends/sql/slot_pool.h"
#include "core/driver.h"

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

struct st_mysql;

namespace dlock::detail::mysql {

class MyConnection final : public sql::PooledConnection {
 public:
  // Connects by `deadline` (into `info.database`, or none when
  // `without_database`) and sets the session up: READ COMMITTED, UTC, row
  // lock waits and (MariaDB) idle transactions bounded by op_timeout.
  // `dialect` may be null for a connection that only runs exec().
  static Result<std::unique_ptr<MyConnection>> open(const ConnectInfo& info, const sql::Dialect* dialect,
                                                    steady::time_point deadline, bool without_database = false);
  ~MyConnection() override;
  MyConnection(const MyConnection&) = delete;
  MyConnection& operator=(const MyConnection&) = delete;

  void set_deadline(steady::time_point deadline) noexcept override { deadline_ = deadline; }
  bool broken() const noexcept override { return broken_; }

  // Runs SQL text (several statements allowed, no parameters); the rows of
  // each statement. An error ends it and rolls back an open transaction.
  Result<std::vector<sql::Rows>> exec(const std::string& text, std::string_view step);
  // The same with ?1, ?2, ... in `text` written as literals of `params`.
  Result<std::vector<sql::Rows>> exec(std::string_view text, const std::vector<sql::Param>& params,
                                      std::string_view step);
  // The same without waiting: `answer` gets the rows when they are read —
  // by the next call on this connection, or read_unanswered().
  void exec_async(std::string_view text, const std::vector<sql::Param>& params, std::string step,
                  std::function<void(Result<std::vector<sql::Rows>>)> answer);

 private:
  MyConnection(st_mysql* mysql, const sql::Dialect* dialect, std::string redacted_url)
      : mysql_(mysql), dialect_(dialect), redacted_url_(std::move(redacted_url)) {}
  // The pool's side (sql::PooledConnection): one multi-statement text per
  // batch; Connector/C reads one text's results before the next is sent.
  Status write(std::span<const sql::Call> calls) override;
  Result<std::vector<sql::Rows>> read(std::span<const sql::Stmt> statements) override;
  bool pipelines() const noexcept override { return false; }
  void end_failed_transaction() override;
  // Sends SQL text; reads the results of the text sent last.
  Status send_text(const std::string& text, std::string_view step);
  Result<std::vector<sql::Rows>> read_results(std::string_view step);
  // Drives a non-blocking call: `status` is what its _start returned;
  // `cont(ready)` is its _cont. Unavailable if the deadline passes first.
  template <class Cont>
  Status drive(int status, Cont cont, std::string_view step);
  Status fail(std::string_view step, std::string why);
  // The error the server or the library reported, translated (errors.h).
  Status error(std::string_view step);

  st_mysql* mysql_;
  const sql::Dialect* dialect_;
  std::string redacted_url_;
  steady::time_point deadline_{};
  bool broken_ = false;
};

}  // namespace dlock::detail::mysql
