// postgres:// — the lock table recipe (backends/sql) on PostgreSQL, through
// libpq.
//
//   postgres://user[:password]@host[:port][,host2[:port2]...]/database[?option=value&...]
//
// Options: mode=table (the default: the lock table recipe, every
// primitive) or mode=session (advisory locks, Mutex only:
// sql/session_locks.h), schema=NAME
// (dlock's tables live there, made with it if missing; default: the user's
// search_path), pool=4
// (connections per client, 1..64: calls of different threads run on
// different connections), waiter_ttl=2s (how long a dead waiter's queue
// entry holds back a fair queue, 1s..1h), and libpq's TLS settings passed
// through: sslmode, sslrootcert, sslcert, sslkey, sslcrl (files that must
// be readable when the client connects).
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
#include "backends/postgres/connection.h"
#include "backends/postgres/listener.h"
#include "backends/postgres/session_locks.h"
#include "backends/postgres/spelling.h"
#include "backends/sql/server_options.h"
#include "backends/sql/slot_pool.h"
#include "backends/sql/table_backend.h"
#include "core/driver.h"
#include "core/option_values.h"
#include "core/url.h"

#include <libpq-fe.h>

#include <condition_variable>
#include <mutex>

namespace dlock::detail {
namespace {

using namespace postgres;
using std::chrono::milliseconds;


struct Config {
  ConnectInfo connect;
  bool session = false;  // mode=session: advisory locks (session_locks.h)
  std::string schema;  // empty: the user's search_path
  int pool = 4;
  sql::TableConfig table;
};

Status invalid(const Url& url, std::string why) { return sql::invalid_url("postgres", url, std::move(why)); }

Result<Config> parse_config(const Url& url, const ClientOptions& options) {
  Config c;
  c.table.op_timeout = options.op_timeout;
  c.connect.redacted_url = url.redacted();
  if (url.endpoints.empty()) return invalid(url, "needs a host, e.g. postgres://user@127.0.0.1:5432/mydb");
  if (url.path.size() < 2 || url.path.find('/', 1) != std::string::npos)
    return invalid(url, "needs the database name as its path, e.g. postgres://user@host/mydb");
  std::string hosts, ports;
  for (const Endpoint& e : url.endpoints) {
    hosts += (hosts.empty() ? "" : ",") + e.host;
    ports += (ports.empty() ? "" : ",") + std::to_string(e.port.value_or(5432));
  }
  auto& p = c.connect.params;
  p = {{"host", hosts}, {"port", ports}, {"dbname", url.path.substr(1)}, {"application_name", "dlock"},
       {"client_encoding", "UTF8"}};
  if (url.user) p.emplace_back("user", *url.user);
  if (url.password) p.emplace_back("password", *url.password);
  const auto op_ms = std::to_string(options.op_timeout.count());
  std::string options_line = "-c lock_timeout=" + op_ms + " -c idle_in_transaction_session_timeout=" +
                             std::to_string(2 * options.op_timeout.count());
  for (const auto& [key, value] : url.query) {
    auto common = sql::read_server_option("postgres", url, key, value, c.session, c.pool, c.table);
    if (!common) return common.status();
    if (*common) continue;
    if (key == "schema") {
      const bool plain = !value.empty() && value.size() <= 63 && !(value[0] >= '0' && value[0] <= '9') &&
                         value.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos;
      if (!plain)
        return invalid(url, "schema '" + value +
                                "' must be 1 to 63 lower-case letters, digits or '_', not starting with a digit");
      c.schema = value;
      options_line += " -c search_path=" + value;
    } else if (key == "sslmode") {
      p.emplace_back(key, value);
    } else if (key == "sslrootcert" || key == "sslcert" || key == "sslkey" || key == "sslcrl") {
      // Files, but for libpq's own words: sslrootcert=system (the
      // system's CAs) and an OpenSSL engine's sslkey=ENGINE:KEY.
      if (value.empty()) return invalid(url, key + " needs a value");
      const bool named = (key == "sslrootcert" && value == "system") ||
                         (key == "sslkey" && value.find(':') != std::string::npos && value[0] != '/');
      if (!named)
        if (Status s = sql::check_tls_file("postgres", url, key, value); !s) return s;
      p.emplace_back(key, value);
    } else {
      return invalid(url, "unknown option '" + key +
                              "' (known: mode, schema, pool, waiter_ttl, sslmode, sslrootcert, sslcert, sslkey, sslcrl)");
    }
  }
  p.emplace_back("options", options_line);
  return c;
}

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
