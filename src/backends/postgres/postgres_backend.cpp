// postgres:// — the lock table recipe (backends/sql) on PostgreSQL, through
// libpq. The URL and its options: config.h.
//
// Clock: expires_at is the database server's clock (clock_timestamp()),
// the one clock every client shares.
//
// Every call ends within ClientOptions::op_timeout: libpq is driven without
// blocking, and a connection whose reply is late is dropped (the server
// then rolls its transaction back) and replaced on the next call. The
// server is also told to give up on a row lock after op_timeout
// (lock_timeout) and to end a session left idle inside a transaction (a
// client stopped half way through one) after twice that.
//
// Batches are sent as one pipeline: an acquire is two round trips (look,
// then take or queue), a release one. Wake-ups: NOTIFY to the waiter's
// client, sent by the release's own statement (listener.h).
#include "backends/postgres/config.h"
#include "backends/postgres/connection.h"
#include "backends/postgres/listener.h"
#include "backends/postgres/session_locks.h"
#include "backends/postgres/spelling.h"
#include "backends/sql/server_options.h"
#include "backends/sql/slot_pool.h"
#include "backends/sql/table_backend.h"
#include "core/driver.h"
#include "core/url.h"

#include <libpq-fe.h>

#include <condition_variable>
#include <mutex>

namespace dlock::detail {
namespace {

using namespace postgres;
// The tables, made if missing (by one client at a time: an advisory lock
// orders concurrent first connections). A user without the right to
// create them gets the DDL to run.
Status ensure_schema(PgConnection& conn, const sql::Dialect& dialect, const std::string& schema,
                     const std::string& url) {
  std::string all_present = "SELECT to_regclass('dlock_session_keys') IS NOT NULL";
  for (std::string_view t : sql::table_names) all_present += " AND to_regclass('" + std::string(t) + "') IS NOT NULL";
  auto present = conn.exec(all_present, "looking for dlock's tables");
  if (!present) return present.status();
  if (present->text(0, 0) == "t") return {};
  const std::string make_schema = schema.empty() ? "" : "CREATE SCHEMA IF NOT EXISTS " + schema + "; ";
  const std::string ddl = dialect.schema() + ";\n" + std::string(session_schema);
  auto made = conn.exec("BEGIN; SELECT pg_advisory_xact_lock(7262457536421675113); " + make_schema + ddl + "; COMMIT",
                        "creating dlock's tables");
  if (made) return {};
  (void)conn.exec("ROLLBACK", "rolling back");
  if (made.status().message().find("SQLSTATE 42501") != std::string::npos)
    return sql::tables_missing("postgres", url, dialect, session_schema);
  return made.status();
}

}  // namespace

Result<std::unique_ptr<Backend>> open_postgres_backend(const Url& url, const ClientOptions& options) {
  auto config = parse_config(url, options);
  if (!config) return config.status();
  static const auto dialect = std::make_shared<const sql::Dialect>(spelling);

  // The listener's connection first: it also makes the tables.
  auto first = PgConnection::open(config->connect, nullptr, steady::now() + options.op_timeout);
  if (!first) return first.status();
  (*first)->set_deadline(steady::now() + options.op_timeout);
  if (Status s = ensure_schema(**first, *dialect, config->schema, config->connect.redacted_url); !s) return s;
  if (config->session) return make_session_backend(config->connect, std::move(*first), options.op_timeout);

  auto mailbox = std::make_shared<sql::Mailbox>();
  config->table.holder_info = sql::this_process();
  return sql::make_table_backend(dialect, mailbox, config->table, [&](Events& events) -> Result<sql::Parts> {
    auto listener = Listener::start(config->connect, std::move(*first), mailbox, events, options.op_timeout);
    if (!listener) return listener.status();
    auto open = [connect = config->connect](steady::time_point deadline)
        -> Result<std::unique_ptr<sql::PooledConnection>> {
      auto conn = PgConnection::open(connect, dialect.get(), deadline);
      if (!conn) return conn.status();
      return std::unique_ptr<sql::PooledConnection>(std::move(*conn));
    };
    return sql::Parts{std::make_unique<sql::SlotPool>("postgres", open, config->pool, events),
                      std::move(*listener)};
  });
}

}  // namespace dlock::detail
