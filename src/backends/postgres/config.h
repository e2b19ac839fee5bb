// config.h — what a postgres:// URL asks for, checked before any I/O.
//
//   postgres://user[:password]@host[:port][,host2[:port2]...]/database[?option=value&...]
//
// Options (anything else is refused, naming it):
//   mode=table       the lock table recipe, every primitive (the default), or
//                    mode=session: advisory locks, Mutex only
//                    (sql/session_locks.h)
//   schema=NAME      where dlock's tables live, made with them if missing
//                    (default: the user's search_path)
//   pool=4, waiter_ttl=2s
//                    as every SQL server backend (sql/server_options.h)
//   sslmode, sslrootcert, sslcert, sslkey, sslcrl
//                    libpq's TLS settings, passed through; the files must be
//                    readable when the client connects. With any of them
//                    and no sslmode, sslmode=verify-full: the server's
//                    certificate and name are checked (libpq alone would
//                    take an unverified or unencrypted connection)
#pragma once

#include "backends/sql/table_backend.h"
#include "core/url.h"

#include <dlock/options.h>
#include <dlock/status.h>

#include <string>
#include <utility>
#include <vector>

namespace dlock::detail::postgres {

// What libpq needs to connect (keyword, value), and the URL for messages.
struct ConnectInfo {
  std::vector<std::pair<std::string, std::string>> params;
  std::string redacted_url;
};

struct Config {
  ConnectInfo connect;
  bool session = false;  // mode=session: advisory locks (session_locks.h)
  std::string schema;  // empty: the user's search_path
  int pool = 4;
  sql::TableConfig table;
};

Result<Config> parse_config(const Url& url, const ClientOptions& options);

}  // namespace dlock::detail::postgres
