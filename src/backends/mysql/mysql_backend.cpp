// mysql:// — the lock table recipe (backends/sql) on MySQL or MariaDB,
// through MariaDB Connector/C. The URL and its options: config.h.
//
// The database is made if it is missing and the user may create it;
// dlock's tables likewise (else the error gives the DDL to run). Names are
// VARBINARY: compared byte for byte, so names differing only in case are
// different locks.
//
// Clock: expires_at is the database server's clock (NOW(3), in UTC), the
// one clock every client shares.
//
// Every call ends within ClientOptions::op_timeout: the client library is
// driven without blocking, and a connection whose reply is late is dropped
// (the server then rolls its transaction back) and replaced on the next
// call. The server gives up on a row lock after op_timeout
// (innodb_lock_wait_timeout, whole seconds) and, on MariaDB, ends a
// session left idle inside a transaction after twice that.
//
// A batch is one multi-statement text: an acquire is two round trips
// (look, then take or queue), a release one. There is no NOTIFY: waiters
// poll with backoff, each attempt keeping their place in the queue.
#include "backends/mysql/config.h"
#include "backends/mysql/connection.h"
#include "backends/mysql/session_locks.h"
#include "backends/mysql/spelling.h"
#include "backends/sql/server_options.h"
#include "backends/sql/slot_pool.h"
#include "backends/sql/table_backend.h"
#include "core/driver.h"
#include "core/url.h"

#include <algorithm>

namespace dlock::detail {
namespace {

using namespace mysql;

// A first connection, into the database; made if missing and the user may.
Result<std::unique_ptr<MyConnection>> first_connection(const ConnectInfo& info, steady::time_point deadline) {
  auto conn = MyConnection::open(info, nullptr, deadline);
  if (conn || conn.status().message().find("(error 1049)") == std::string::npos) return conn;
  auto bare = MyConnection::open(info, nullptr, deadline, true);
  if (!bare) return bare.status();
  const std::string make = "CREATE DATABASE IF NOT EXISTS `" + info.database + "` CHARACTER SET utf8mb4";
  auto made = (*bare)->exec(make, "creating the database");
  if (!made)
    return Status(errc::unavailable, "mysql backend: " + info.redacted_url + ": database '" + info.database +
                                         "' does not exist and this user may not create it; run " + make);
  return MyConnection::open(info, nullptr, deadline);
}

// The tables, made if missing (CREATE TABLE IF NOT EXISTS: concurrent first
// clients are ordered by the server). A user without the right to create
// them gets the DDL to run.
Status ensure_schema(MyConnection& conn, const sql::Dialect& dialect, const std::string& url) {
  std::string tables = "'dlock_session_keys'";
  for (std::string_view t : sql::table_names) tables += ",'" + std::string(t) + "'";
  auto present = conn.exec("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND "
                           "table_name IN (" + tables + ")",
                           "looking for dlock's tables");
  if (!present) return present.status();
  if (present->size() == 1 && (*present)[0].integer(0, 0) == static_cast<std::int64_t>(sql::table_names.size() + 1))
    return {};
  auto made = conn.exec(dialect.schema() + ";\n" + std::string(session_schema), "creating dlock's tables");
  if (made) return {};
  if (made.status().message().find("(error 1142)") != std::string::npos)
    return sql::tables_missing("mysql", url, dialect, session_schema);
  return made.status();
}

}  // namespace

Result<std::unique_ptr<Backend>> open_mysql_backend(const Url& url, const ClientOptions& options) {
  auto config = parse_config(url, options);
  if (!config) return config.status();
  static const auto dialect = std::make_shared<const sql::Dialect>(spelling);

  {
    auto first = first_connection(config->connect, steady::now() + options.op_timeout);
    if (!first) return first.status();
    if (Status s = ensure_schema(**first, *dialect, config->connect.redacted_url); !s) return s;
  }
  if (config->session) return make_session_backend(config->connect);

  config->table.holder_info = sql::this_process();
  config->table.max_backoff = options.max_backoff;
  return sql::make_table_backend(dialect, std::make_shared<sql::Mailbox>(), config->table,
                                 [&](Events& events) -> Result<sql::Parts> {
    auto open = [connect = config->connect](steady::time_point deadline)
        -> Result<std::unique_ptr<sql::PooledConnection>> {
      auto conn = MyConnection::open(connect, dialect.get(), deadline);
      if (!conn) return conn.status();
      return std::unique_ptr<sql::PooledConnection>(std::move(*conn));
    };
    return sql::Parts{std::make_unique<sql::SlotPool>("mysql", open, config->pool, events), nullptr};
  });
}

}  // namespace dlock::detail
