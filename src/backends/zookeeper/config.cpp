#include "backends/zookeeper/config.h"

#include "core/duration.h"
#include "core/option_values.h"
#include "core/validate.h"

namespace dlock::detail::zookeeper {
namespace {

using std::chrono::milliseconds;

Status invalid(const Config& c, std::string why) {
  return Status(errc::invalid_argument, "zookeeper url " + c.redacted_url + ": " + std::move(why));
}

// The next UTF-8 code point of s at i (s is valid UTF-8: core checked it).
char32_t next_code_point(std::string_view s, std::size_t& i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  char32_t c = byte(i);
  int extra = c < 0x80 ? 0 : c < 0xE0 ? 1 : c < 0xF0 ? 2 : 3;
  if (extra) c &= 0x3F >> extra;
  for (int k = 1; k <= extra && i + k < s.size(); ++k) c = (c << 6) | (byte(i + k) & 0x3F);
  i += 1 + extra;
  return c;
}

}  // namespace

Status check_segment(std::string_view segment, std::string_view what) {
  const std::string quoted = "'" + std::string(segment) + "'";
  if (segment.empty()) return Status(errc::invalid_argument, std::string(what) + " has an empty segment ('//', or a leading or trailing '/')");
  if (segment == "." || segment == "..")
    return Status(errc::invalid_argument, std::string(what) + ": ZooKeeper refuses the segment " + quoted);
  for (std::size_t i = 0; i < segment.size();) {
    char32_t c = next_code_point(segment, i);
    // The characters ZooKeeper's path validation refuses.
    if (c == 0 || (c >= 0x01 && c <= 0x1F) || (c >= 0x7F && c <= 0x9F) || (c >= 0xD800 && c <= 0xF8FF) ||
        (c >= 0xFFF0 && c <= 0xFFFF))
      return Status(errc::invalid_argument,
                    std::string(what) + ": segment " + quoted +
                        " has a character ZooKeeper refuses (control, private-use or U+FFF0..U+FFFF)");
  }
  return {};
}

Result<Config> parse_config(const Url& url, const ClientOptions& options) {
  Config c;
  c.redacted_url = url.redacted();
  c.op_timeout = options.op_timeout;
  c.user = url.user;
  c.password = url.password;
  if (c.user.has_value() != c.password.has_value())
    return invalid(c, "digest authentication needs both a user and a password (zk://user:password@host)");
  if (c.user && (c.user->empty() || c.user->find(':') != std::string::npos))
    return invalid(c, "the user must be non-empty and contain no ':'");
  if (c.password && c.password->empty()) return invalid(c, "empty password");

  if (url.endpoints.empty()) return invalid(c, "needs at least one host, e.g. zk://127.0.0.1:2181");
  for (const auto& e : url.endpoints) {
    if (!c.hosts.empty()) c.hosts += ",";
    c.hosts += (e.host.find(':') != std::string::npos ? "[" + e.host + "]" : e.host) + ":" +
               std::to_string(e.port.value_or(default_port));
  }

  if (!url.path.empty()) {
    if (url.path == "/") {
      c.root = "/";
    } else {
      if (url.path.back() == '/') return invalid(c, "the root path '" + url.path + "' must not end in '/'");
      std::string_view rest = std::string_view(url.path).substr(1);
      for (auto segment : path_segments(rest))
        if (Status s = check_segment(segment, "the root path '" + url.path + "'"); !s) return invalid(c, s.message());
      if (rest == "zookeeper" || rest.starts_with("zookeeper/"))
        return invalid(c, "the root path must not be under /zookeeper (ZooKeeper's own nodes)");
      c.root = url.path;
    }
  }

  for (const auto& [key, value] : url.query) {
    if (key == "session_timeout") {
      auto d = parse_duration_within(value, "session_timeout", std::chrono::seconds(1), std::chrono::minutes(10));
      if (!d) return invalid(c, d.status().message());
      c.session_timeout = *d;
    } else if (key == "lost_on") {
      if (value == "suspend") c.lost_on_suspend = true;
      else if (value == "expiry") c.lost_on_suspend = false;
      else return invalid(c, "lost_on '" + value + "' must be 'suspend' (the default) or 'expiry'");
    } else {
      return invalid(c, "unknown option '" + key + "' (known: session_timeout, lost_on)");
    }
  }
  return c;
}

std::string lock_path(const Config& config, std::string_view name) {
  return (config.root == "/" ? std::string() : config.root) + "/" + std::string(name);
}

}  // namespace dlock::detail::zookeeper
