// config.cpp — reading a file:// URL (config.h).
#include "backends/file/config.h"

#include "core/local_path.h"

namespace dlock::detail::file {

Status invalid_url(std::string why) { return Status(errc::invalid_argument, "file url: " + std::move(why)); }

Result<Config> parse_config(const Url& url, const ClientOptions&) {
  if (!url.endpoints.empty() && !(url.endpoints.size() == 1 && url.endpoints[0].host == "localhost"))
    return invalid_url("takes no host; write file:///absolute/dir");
  if (url.user || url.password) return invalid_url("takes no user or password");
  const std::string& dir = url.path;
  if (dir.empty() || dir.front() != '/') return invalid_url("needs an absolute directory, e.g. file:///var/lib/myapp/locks");
  if (dir == "/") return invalid_url("refusing to keep lock files in '/'");
  // One trailing '/' is fine for a directory.
  std::string path = dir.back() == '/' ? dir.substr(0, dir.size() - 1) : dir;
  if (!is_plain_absolute_path(path))
    return invalid_url("directory '" + dir + "' must be a plain path without '.', '..' or empty segments");
  bool sync = false;
  for (const auto& [key, value] : url.query) {
    if (key == "fsync") {
      if (value == "1" || value == "true") sync = true;
      else if (value == "0" || value == "false") sync = false;
      else return invalid_url("fsync must be true or false (got '" + value + "')");
    } else {
      return invalid_url("unknown option '" + key + "' (known: fsync)");
    }
  }
  return Config{std::move(path), sync};
}

}  // namespace dlock::detail::file
