// config.cpp — reading a mysql:// URL (config.h).
#include "backends/mysql/config.h"

#include "backends/sql/server_options.h"

#include <algorithm>

namespace dlock::detail::mysql {
namespace {

Status invalid(const Url& url, std::string why) { return sql::invalid_url("mysql", url, std::move(why)); }

bool tls_option(const std::string& key) {
  for (const char* known : {"ssl", "ssl-ca", "ssl-capath", "ssl-cert", "ssl-key", "ssl-crl", "ssl-cipher",
                            "tls-version", "ssl-verify-server-cert"})
    if (key == known) return true;
  return false;
}

}  // namespace

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
  // TLS asked for (ssl=1, or a CA, certificate, key...) verifies the
  // server's certificate and name unless ssl-verify-server-cert=0 says not.
  const bool tls_on = std::any_of(c.connect.tls.begin(), c.connect.tls.end(),
                                  [](const auto& kv) { return !(kv.first == "ssl" && kv.second == "0"); });
  if (tls_on && !url.query.count("ssl-verify-server-cert")) c.connect.tls.emplace_back("ssl-verify-server-cert", "1");
  if (c.session && c.connect.database.size() > session_database_max)
    return invalid(url, "mode=session takes a database name of at most " + std::to_string(session_database_max) +
                            " characters (the server's lock names, dlock/<database>/<id>, are at most 64)");
  return c;
}

}  // namespace dlock::detail::mysql
