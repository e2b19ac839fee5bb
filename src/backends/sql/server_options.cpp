#include "backends/sql/server_options.h"

#include "core/option_values.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dlock::detail::sql {

Status invalid_url(std::string_view backend, const Url& url, std::string why) {
  return Status(errc::invalid_argument, std::string(backend) + " url " + url.redacted() + ": " + std::move(why));
}

Result<bool> read_server_option(std::string_view backend, const Url& url, const std::string& key,
                                const std::string& value, bool& session, int& pool, TableConfig& table) {
  if (key == "mode") {
    if (value != "table" && value != "session")
      return invalid_url(backend, url, "mode '" + value + "' must be table or session");
    session = value == "session";
  } else if (key == "pool") {
    auto n = parse_count(value, "pool", 1, 64);
    if (!n) return invalid_url(backend, url, n.status().message());
    pool = *n;
  } else if (key == "waiter_ttl") {
    auto d = parse_duration_within(value, "waiter_ttl", std::chrono::seconds(1), std::chrono::hours(1));
    if (!d) return invalid_url(backend, url, d.status().message());
    table.waiter_ttl = *d;
  } else {
    return false;
  }
  return true;
}

Status check_tls_file(std::string_view backend, const Url& url, const std::string& key, const std::string& path) {
  if (::access(path.c_str(), R_OK) == 0) return Status();
  const int error = errno;
  return invalid_url(backend, url, key + "='" + path + "' cannot be read: " + std::strerror(error));
}

Status tables_missing(std::string_view backend, std::string_view redacted_url, const Dialect& dialect,
                      std::string_view session_ddl) {
  return Status(errc::unavailable,
                std::string(backend) + " backend: " + std::string(redacted_url) +
                    ": dlock's tables are missing and this user may not create them. Run as their owner:\n" +
                    dialect.schema() + ";\n" + std::string(session_ddl) + ";\nthen GRANT SELECT, INSERT, UPDATE, DELETE ON " +
                    table_list() + ", dlock_session_keys TO <this user>;");
}

std::string privileges_needed() {
  return "the database user needs SELECT, INSERT, UPDATE and DELETE on " + table_list();
}

}  // namespace dlock::detail::sql
