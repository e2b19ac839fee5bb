// config.h — what a mysql:// URL asks for, checked before any I/O.
//
//   mysql://user[:password]@host[:port]/database[?option=value&...]
//
// Options (anything else is refused, naming it):
//   mode=table       the lock table recipe, every primitive (the default), or
//                    mode=session: GET_LOCK, Mutex only (session_locks.h)
//   pool=4, waiter_ttl=2s
//                    as every SQL server backend (sql/server_options.h)
//   ssl=1 (require TLS), ssl-ca, ssl-capath, ssl-cert, ssl-key, ssl-crl,
//   ssl-cipher, tls-version, ssl-verify-server-cert
//                    the client library's TLS settings, passed through; the
//                    files must be readable when the client connects. With
//                    any of them the server's certificate and name are
//                    verified (ssl-verify-server-cert=1) unless
//                    ssl-verify-server-cert=0 turns that off
#pragma once

#include "backends/sql/table_backend.h"
#include "core/url.h"

#include <dlock/options.h>
#include <dlock/status.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace dlock::detail::mysql {

// The longest database name session mode takes: the server's lock names
// ("dlock/<database>/<id>") are at most 64 characters on MySQL.
inline constexpr std::size_t session_database_max = 37;

// Where and how to connect, and the URL for messages.
struct ConnectInfo {
  std::string host;
  unsigned port = 3306;
  std::string user, password, database;
  // TLS settings passed to the client library (url option -> value).
  std::vector<std::pair<std::string, std::string>> tls;
  std::string redacted_url;
  std::chrono::milliseconds op_timeout{};
};

struct Config {
  ConnectInfo connect;
  bool session = false;  // mode=session: GET_LOCK (session_locks.h)
  int pool = 4;
  sql::TableConfig table;
};

Result<Config> parse_config(const Url& url, const ClientOptions& options);

}  // namespace dlock::detail::mysql
