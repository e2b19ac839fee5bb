#include "backends/etcd/config.h"

#include "core/option_values.h"
#include "core/validate.h"

namespace dlock::detail::etcd {
namespace {

Status invalid(const Config& c, std::string why) {
  return Status(errc::invalid_argument, "etcd url " + c.redacted_url + ": " + std::move(why));
}

}  // namespace

Status check_segment(std::string_view segment, std::string_view what) {
  if (segment.empty())
    return Status(errc::invalid_argument, std::string(what) + " has an empty segment ('//', or a leading or trailing '/')");
  if (segment == "." || segment == "..")
    return Status(errc::invalid_argument, std::string(what) + ": the segment '" + std::string(segment) +
                                              "' would be read as a relative path by tools that name keys");
  for (char ch : segment)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f)
      return Status(errc::invalid_argument, std::string(what) + " has a control character");
  return {};
}

Result<Config> parse_config(const Url& url, const ClientOptions& options) {
  Config c;
  c.redacted_url = url.redacted();
  c.op_timeout = options.op_timeout;
  c.user = url.user;
  c.password = url.password;
  if (c.user.has_value() != c.password.has_value())
    return invalid(c, "authentication needs both a user and a password (etcd://user:password@host)");
  if (c.user && c.user->empty()) return invalid(c, "empty user");
  if (c.password && c.password->empty()) return invalid(c, "empty password");

  if (url.endpoints.empty()) return invalid(c, "needs at least one host, e.g. etcd://127.0.0.1:2379");
  for (const auto& e : url.endpoints)
    c.endpoints.push_back((e.host.find(':') != std::string::npos ? "[" + e.host + "]" : e.host) + ":" +
                          std::to_string(e.port.value_or(2379)));

  if (!url.path.empty() && url.path != "/") {
    if (url.path.back() == '/') return invalid(c, "the prefix '" + url.path + "' must not end in '/'");
    const std::string_view rest = std::string_view(url.path).substr(1);
    for (auto segment : path_segments(rest))
      if (Status s = check_segment(segment, "the prefix '" + url.path + "'"); !s) return invalid(c, s.message());
    c.prefix = std::string(rest);
  }

  for (const auto& [key, value] : url.query) {
    if (key == "ttl") {
      auto d = parse_duration_within(value, "ttl", std::chrono::seconds(2), std::chrono::hours(1));
      if (!d) return invalid(c, d.status().message());
      if (d->count() % 1000 != 0) return invalid(c, "ttl '" + value + "' must be whole seconds (etcd leases are)");
      c.ttl = std::chrono::duration_cast<std::chrono::seconds>(*d);
    } else {
      return invalid(c, "unknown option '" + key + "' (known: ttl)");
    }
  }
  return c;
}

std::string lock_prefix(const Config& config, std::string_view name) {
  return config.prefix + "/" + std::string(name) + "/";
}

std::string kind_root(const Config& config, std::string_view kind) {
  return config.prefix + "." + std::string(kind) + "/";
}

std::string kind_prefix(const Config& config, std::string_view kind, std::string_view name) {
  return kind_root(config, kind) + std::string(name) + "/";
}

}  // namespace dlock::detail::etcd
