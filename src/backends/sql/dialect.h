// dialect.h — the SQL of the table recipe, per database.
//
// Every statement is written once (dialect.cpp) with ?1, ?2, ... for its
// parameters and a few markers for what databases spell differently (the
// store's clock, a prefix test, types); a Dialect fills them in. A client
// that numbers parameters another way ($1 on PostgreSQL) rewrites ?N itself.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace dlock::detail::sql {

// The statements of the recipe. Parameters and columns are listed in
// dialect.cpp next to each text.
enum class Stmt : std::size_t {
  begin,
  commit,
  rollback,
  lock_fence,
  holders,
  waiters,
  bump_token,
  drop_expired,
  drop_dead_waiters,
  insert_hold,
  enqueue,
  dequeue,
  release,
  heads,
  hand_over,
  bump_handed,
  dequeue_holders,
  own_hold,
  drop_own,
  extend,
  force_release,
  list,
  leader,
  ping,
  lock_count,
  read_count,
  set_count,
  count_  // not a statement: how many there are
};

constexpr std::size_t statement_count = static_cast<std::size_t>(Stmt::count_);

// The recipe's tables (dialect.cpp says what each holds).
constexpr std::array<std::string_view, 5> table_names = {"dlock_holds", "dlock_fences", "dlock_waiters",
                                                         "dlock_counts", "dlock_ping"};

// "dlock_holds, dlock_fences, ..." for messages and GRANTs.
std::string table_list();

// For errors: what a statement does ("issuing a fencing token", ...).
std::string_view purpose(Stmt statement);

struct DialectSpelling {
  std::string_view name;         // "sqlite", "postgres": for messages
  std::string_view begin;        // starts a transaction that writes
  std::string_view now_ms;       // the store's clock, unix milliseconds, as an expression
  std::string_view starts_with;  // a test that `name` starts with ?1 (bytes), as an expression
  std::string_view text_type;    // column type of names and texts
  std::string_view table_suffix; // after a CREATE TABLE's closing parenthesis
  // A statement the `heads` query is wrapped in so that the database itself
  // tells every head it returns, on commit (PostgreSQL's NOTIFY), with %s
  // for the query; empty where the client wakes them.
  std::string_view notify_heads;
};

class Dialect {
 public:
  explicit Dialect(const DialectSpelling& spelling);

  std::string_view name() const noexcept { return name_; }
  const std::string& sql(Stmt statement) const { return texts_[static_cast<std::size_t>(statement)]; }
  // The tables, one CREATE TABLE IF NOT EXISTS each, separated by ';'.
  const std::string& schema() const noexcept { return schema_; }
  // Whether the `heads` statement wakes the heads it returns by itself.
  bool database_wakes_heads() const noexcept { return database_wakes_; }

 private:
  std::string name_;
  std::array<std::string, statement_count> texts_;
  std::string schema_;
  bool database_wakes_ = false;
};

}  // namespace dlock::detail::sql
