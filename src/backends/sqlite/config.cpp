// config.cpp — reading a sqlite:// URL (config.h).
#include "backends/sqlite/config.h"

#include "core/local_path.h"

namespace dlock::detail::sqlite {
Status invalid_url(std::string why) { return Status(errc::invalid_argument, "sqlite url: " + std::move(why)); }

Result<Config> parse_config(const Url& url, const ClientOptions&) {
  if (!url.endpoints.empty()) return invalid_url("takes no host; write sqlite:///absolute/path.db (three slashes)");
  if (url.user || url.password) return invalid_url("takes no user or password");
  if (!url.query.empty()) return invalid_url("unknown option '" + url.query.begin()->first + "' (this backend takes none)");
  const std::string& path = url.path;
  if (path.empty() || path.front() != '/')
    return invalid_url("needs an absolute path to the database file, e.g. sqlite:///var/lib/myapp/locks.db");
  if (path.find('\0') != std::string::npos) return invalid_url("path contains a NUL byte");
  if (path.back() == '/') return invalid_url("path '" + path + "' names a directory; it must name the database file");
  if (!is_plain_absolute_path(path))
    return invalid_url("path '" + path + "' must be a plain absolute path without '.', '..' or empty segments");
  return Config{path};
}

}  // namespace dlock::detail::sqlite
