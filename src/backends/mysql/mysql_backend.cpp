// mysql:// — the lock table recipe (backends/sql) on MySQL or MariaDB,
// through MariaDB Connector/C.
//
//   mysql://user[:password]@host[:port]/database[?option=value&...]
//
// Options: mode=table (the default: the lock table recipe, every
// primitive) or mode=session (GET_LOCK, Mutex only: session_locks.h),
// pool=4 and waiter_ttl=2s (sql/server_options.h), and the client library's TLS
// settings passed through: ssl=1 (require TLS), ssl-ca, ssl-capath,
// ssl-cert, ssl-key, ssl-crl (files that must be readable when the client
// connects), ssl-cipher, tls-version, ssl-verify-server-cert=1.
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

struct Config {
  ConnectInfo connect;
  bool session = false;  // mode=session: GET_LOCK (session_locks.h)
  int pool = 4;
  sql::TableConfig table;
};

Status invalid(const Url& url, std::string why) { return sql::invalid_url("mysql", url, std::move(why)); }

bool tls_option(const std::string& key) {
  for (const char* known : {"ssl", "ssl-ca", "ssl-capath", "ssl-cert", "ssl-key", "ssl-crl", "ssl-cipher",
                            "tls-version", "ssl-verify-server-cert"})
    if (key == known) return true;
  return false;
}

Result<Config> parse_config(const Url& url, const ClientOptions& options) {
  Config c;
  c.table.op_timeout = options.op_timeout;
  c.connect.op_timeout = options.op_timeout;
  c.connect.redacted_url = url.redacted();
  if (url.endpoints.empty()) return invalid(url, "needs a host, e.g. mysql://user@127.0.0.1:3306/mydb");
  if (url.endpoints.size() > 1) return invalid(url, "takes one host (a MySQL server or a proxy in front of several)");
  c.connect.host = url.endpoints[0].host;
  c.connect.port = url.endpoints[0].port.value_or(3306);
  if (url.path.size() < 2 || url.path.find('/', 1) != std::string::npos)
    return invalid(url, "needs the database name as its path, e.g. mysql://user@host/mydb");
  c.connect.database = url.path.substr(1);
  if (c.connect.database.size() > 64 ||
      c.connect.database.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$-") !=
          std::string::npos)
    return invalid(url, "database '" + c.connect.database + "' must be 1 to 64 letters, digits, '_', '$' or '-'");
  c.connect.user = url.user.value_or("");
  c.connect.password = url.password.value_or("");
  for (const auto& [key, value] : url.query) {
    auto common = sql::read_server_option("mysql", url, key, value, c.session, c.pool, c.table);
    if (!common) return common.status();
    if (*common) continue;
    if (!tls_option(key))
      return invalid(url, "unknown option '" + key +
                              "' (known: mode, pool, waiter_ttl, ssl, ssl-ca, ssl-capath, ssl-cert, ssl-key, ssl-crl, "
                              "ssl-cipher, tls-version, ssl-verify-server-cert)");
    if ((key == "ssl" || key == "ssl-verify-server-cert") && value != "0" && value != "1")
      return invalid(url, key + " '" + value + "' must be 0 or 1");
    if (value.empty()) return invalid(url, key + " needs a value");
    if (key == "ssl-ca" || key == "ssl-capath" || key == "ssl-cert" || key == "ssl-key" || key == "ssl-crl")
      if (Status s = sql::check_tls_file("mysql", url, key, value); !s) return s;
    c.connect.tls.emplace_back(key, value);
  }
  if (c.session && c.connect.database.size() > session_database_max)
    return invalid(url, "mode=session takes a database name of at most " + std::to_string(session_database_max) +
                            " characters (the server's lock names, dlock/<database>/<id>, are at most 64)");
  return c;
}

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
