// statement.h — RAII around SQLite's prepared statements and transactions.
//
// Statements are prepared once per connection and reused (Statement); each
// use goes through a Query, which resets the statement on the way out so it
// never keeps a read snapshot open between calls. A Transaction rolls back
// on every way out that is not its commit() (STYLE rule 9).
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

  std::int64_t column_int(int column) const;
  std::string column_text(int column) const;

 private:
  Statement& statement_;
  int bind_rc_ = 0;  // first failed bind, reported by step()
};

// BEGIN IMMEDIATE ... COMMIT. IMMEDIATE takes the database's write lock at
// the start, so the reads inside see what the writes will change (no other
// writer can come in between) and a busy database makes begin() wait in
// the busy handler rather than fail half way through.
class Transaction {
 public:
  Transaction(sqlite3* db, Statement& begin, Statement& commit, Statement& rollback) noexcept
      : db_(db), begin_(begin), commit_(commit), rollback_(rollback) {}
  // Rolls back unless commit() succeeded (and if SQLite has not already).
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  Status begin();
  Status commit();

 private:
  sqlite3* db_;
  Statement& begin_;
  Statement& commit_;
  Statement& rollback_;
};

}  // namespace dlock::detail::sqlite
