// config.cpp — reading a postgres:// URL (config.h).
#include "backends/postgres/config.h"

#include "backends/sql/server_options.h"

namespace dlock::detail::postgres {
namespace {

Status invalid(const Url& url, std::string why) { return sql::invalid_url("postgres", url, std::move(why)); }

}  // namespace

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
  // TLS asked for without saying how: verified, server name included, not
  // libpq's default (prefer: encrypt if the server will, check nothing).
  const auto given = [&](std::string_view key) { return url.query.count(std::string(key)) > 0; };
  if (!given("sslmode") && (given("sslrootcert") || given("sslcert") || given("sslkey") || given("sslcrl")))
    p.emplace_back("sslmode", "verify-full");
  p.emplace_back("options", options_line);
  return c;
}

}  // namespace dlock::detail::postgres
