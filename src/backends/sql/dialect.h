// dialect.h — the SQL of the table recipe, per database.
//
// Every statement is written once (dialect.cpp) with ?1, ?2, ... for its
// parameters and a few markers for what databases spell differently (the
// store's clock, a prefix test, types); a Dialect fills them in. A client
// that numbers parameters another way ($1 on PostgreSQL) rewrites ?N itself.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <span>
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
  read_fence,
  read_release,
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

// A statement a database spells its own way (an upsert, mostly), with the
// same parameters and markers as the generic text it replaces.
struct Override {
  Stmt statement;
  std::string_view sql;
};

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
  // Column type of the texts in a primary key, where the database needs a
  // bounded one (names are at most 512 bytes); empty: text_type.
  std::string_view key_type = {};
  // Whether INSERT and DELETE ... RETURNING exist. Where they do not
  // (MySQL), the RETURNING clauses are dropped and the recipe reads those
  // rows with a statement of its own next to them (Dialect::stand_in).
  bool returning = true;
  // The statements this database spells differently; keep it short.
  std::span<const Override> overrides = {};
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
  // Where the database lacks RETURNING: the statement that reads what
  // `statement` would return with it, sent with the same parameters just
  // before it (a row it deletes) or just after it (a row it writes); its
  // rows stand for the statement's. nullopt: none needed.
  struct StandIn {
    Stmt read;
    bool before;
  };
  std::optional<StandIn> stand_in(Stmt statement) const;

 private:
  std::string name_;
  std::array<std::string, statement_count> texts_;
  std::string schema_;
  bool database_wakes_ = false;
  bool returning_ = true;
};

}  // namespace dlock::detail::sql
