// server_options.h — what the URLs of the SQL server backends (postgres://,
// mysql://) share: the options every one has, and the error for tables the
// user may not create.
#pragma once

#include "backends/sql/dialect.h"
#include "backends/sql/table_backend.h"
#include "core/url.h"

#include <dlock/status.h>

#include <string>
#include <string_view>

namespace dlock::detail::sql {

// invalid_argument: "<backend> url <url, redacted>: <why>".
Status invalid_url(std::string_view backend, const Url& url, std::string why);

// The options every SQL server backend has:
//   mode=table        the lock table (the default; every primitive) or
//                     mode=session (the database's own session locks,
//                     Mutex only: session_locks.h)
//   pool=4            connections per client, 1..64 (calls of different
//                     threads run on different connections)
//   waiter_ttl=2s     how long a dead waiter's queue entry holds back a
//                     fair queue, 1s..1h
// Reads `key` into `session`, `pool` or `table` if it is one of them
// (true), leaves them alone if it is another option (false), or refuses a
// bad value.
Result<bool> read_server_option(std::string_view backend, const Url& url, const std::string& key,
                                const std::string& value, bool& session, int& pool, TableConfig& table);

// invalid_argument unless `path`, the value of the TLS option `key` (a CA
// file or directory, a certificate, a key, a CRL), names something this
// process can read. Checked before connecting because the client libraries
// report it badly: libpq goes on without a client certificate it cannot
// find (the server then says it wants one), and MariaDB Connector/C leaves
// the file's name out. The message names the option and the path, never
// a file's contents.
Status check_tls_file(std::string_view backend, const Url& url, const std::string& key, const std::string& path);

Status tables_missing(std::string_view backend, std::string_view redacted_url, const Dialect& dialect,
                      std::string_view session_ddl);

// What a user denied access to dlock's tables needs, for error messages.
std::string privileges_needed();

}  // namespace dlock::detail::sql
