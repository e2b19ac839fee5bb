#include "backends/sqlite/statement.h"

#include "backends/sqlite/errors.h"

#include <sqlite3.h>

#include <utility>

namespace dlock::detail::sqlite {

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement::Statement(Statement&& other) noexcept
    : stmt_(std::exchange(other.stmt_, nullptr)), what_(std::move(other.what_)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    sqlite3_finalize(stmt_);
    stmt_ = std::exchange(other.stmt_, nullptr);
    what_ = std::move(other.what_);
  }
  return *this;
}

Result<Statement> Statement::prepare(sqlite3* db, std::string_view sql, std::string_view what) {
  Statement s;
  s.what_ = what;
  // PERSISTENT: these live as long as the connection, so SQLite keeps them
  // out of its short-lived lookaside memory.
  int rc =
      sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &s.stmt_, nullptr);
  if (rc != SQLITE_OK) return to_status(db, rc, "preparing '" + s.what_ + "'");
  return s;
}

Query::~Query() {
  sqlite3_reset(statement_.get());
  sqlite3_clear_bindings(statement_.get());
}

Query& Query::bind(int index, std::int64_t value) {
  int rc = sqlite3_bind_int64(statement_.get(), index, value);
  if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  return *this;
}

Query& Query::bind(int index, std::string_view text) {
  // A non-null pointer even for "": a null one would bind NULL, not ''.
  int rc = sqlite3_bind_text64(statement_.get(), index, text.empty() ? "" : text.data(), text.size(), SQLITE_TRANSIENT,
                               SQLITE_UTF8);
  if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  return *this;
}

Query& Query::bind_blob(int index, std::string_view bytes) {
  int rc =
      sqlite3_bind_blob64(statement_.get(), index, bytes.empty() ? "" : bytes.data(), bytes.size(), SQLITE_TRANSIENT);
  if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  return *this;
}

int Query::step() {
  if (bind_rc_ != SQLITE_OK) return bind_rc_;
  return sqlite3_step(statement_.get());
}

Status Query::run() {
  int rc;
  while ((rc = step()) == SQLITE_ROW) {
  }
  return rc == SQLITE_DONE ? Status{} : error(rc);
}

Status Query::error(int rc) const { return to_status(sqlite3_db_handle(statement_.get()), rc, statement_.what()); }

int Query::changes() const { return sqlite3_changes(sqlite3_db_handle(statement_.get())); }

int Query::column_count() const { return sqlite3_column_count(statement_.get()); }

bool Query::column_is_null(int column) const { return sqlite3_column_type(statement_.get(), column) == SQLITE_NULL; }

std::int64_t Query::column_int(int column) const { return sqlite3_column_int64(statement_.get(), column); }

std::string Query::column_text(int column) const {
  const auto* text = sqlite3_column_text(statement_.get(), column);
  if (!text) return {};
  return std::string(reinterpret_cast<const char*>(text),
                     static_cast<std::size_t>(sqlite3_column_bytes(statement_.get(), column)));
}

}  // namespace dlock::detail::sqlite
