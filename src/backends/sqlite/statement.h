// statement.h — RAII around SQLite's prepared statements.
//
// Statements are prepared once per connection and reused (Statement); each
// use goes through a Query, which resets the statement on the way out so it
// never keeps a read snapshot open between calls.
//
// Not thread-safe: callers hold the connection's mutex while using these.
#pragma once

#include <dlock/status.h>

#include <cstdint>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace dlock::detail::sqlite {

class Statement {
 public:
  Statement() = default;
  ~Statement();
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Compiles `sql` once for `db`. Errors name the statement's purpose, `what`.
  static Result<Statement> prepare(sqlite3* db, std::string_view sql, std::string_view what);

  sqlite3_stmt* get() const noexcept { return stmt_; }
  const std::string& what() const noexcept { return what_; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  std::string what_;
};

// One execution of a prepared statement. Parameters are numbered from 1
// (?1, ?2, ...), columns from 0.
class Query {
 public:
  explicit Query(Statement& statement) noexcept : statement_(statement) {}
  ~Query();  // resets the statement and clears its bindings
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;

  Query& bind(int index, std::int64_t value);
  Query& bind(int index, std::string_view text);
  // Compared byte for byte (a TEXT value compares as text, not bytes).
  Query& bind_blob(int index, std::string_view bytes);

  // SQLITE_ROW (a row to read), SQLITE_DONE, or an error code (a failed
  // bind is reported here).
  int step();
  // Steps until SQLITE_DONE; ok, or the error from the step as a Status.
  Status run();
  // The error for the code step() returned, named after the statement.
  Status error(int rc) const;
  // Rows changed by the last finished INSERT/UPDATE/DELETE on the connection.
  int changes() const;

  int column_count() const;
  bool column_is_null(int column) const;
  std::int64_t column_int(int column) const;
  std::string column_text(int column) const;

 private:
  Statement& statement_;
  int bind_rc_ = 0;  // first failed bind, reported by step()
};

}  // namespace dlock::detail::sqlite
