#include "backends/etcd/config.h"

#include "core/option_values.h"
#include "core/validate.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace dlock::detail::etcd {
namespace {

Status invalid(const Config& c, std::string why) {
  return Status(errc::invalid_argument, "etcd url " + c.redacted_url + ": " + std::move(why));
}

// The PEM text of the file an option names; `what` is what it must hold
// ("CERTIFICATE", "PRIVATE KEY"). Messages name the option and the path,
// never the contents (a key's are secret).
Result<std::string> read_pem(const Config& c, std::string_view option, const std::string& path, std::string_view what) {
  if (path.empty()) return invalid(c, std::string(option) + "= needs a file name");
  std::error_code ec;
  std::ifstream in;
  if (std::filesystem::is_regular_file(path, ec)) in.open(path, std::ios::binary);
  if (!in.is_open() || !in)
    return invalid(c, std::string(option) + "='" + path +
                          "' cannot be read (missing, not a file, or not readable by this process)");
  std::ostringstream text;
  text << in.rdbuf();
  const std::string pem = text.str();
  if (pem.find("-----BEGIN ") == std::string::npos || pem.find(std::string(what) + "-----") == std::string::npos)
    return invalid(c, std::string(option) + "='" + path + "' holds no PEM " + std::string(what));
  return pem;
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
  c.tls = url.scheme == "etcds";
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
    } else if (key == "ca" || key == "cert" || key == "key") {
      if (!c.tls) return invalid(c, "the option '" + key + "' is for TLS: use etcds://");
      (key == "ca" ? c.ca_file : key == "cert" ? c.cert_file : c.key_file) = value;
    } else {
      return invalid(c, "unknown option '" + key + "' (known: ttl" + (c.tls ? ", ca, cert, key)" : ")"));
    }
  }
  if (c.cert_file.empty() != c.key_file.empty())
    return invalid(c, "a client certificate needs both cert= and key=");
  // Read last: a URL that is wrong anyway is refused without touching files.
  struct PemFile {
    const char* option;
    const std::string& path;
    std::string& pem;
    const char* holds;
  };
  for (const PemFile& f : {PemFile{"ca", c.ca_file, c.ca_pem, "CERTIFICATE"},
                           PemFile{"cert", c.cert_file, c.cert_pem, "CERTIFICATE"},
                           PemFile{"key", c.key_file, c.key_pem, "PRIVATE KEY"}}) {
    if (!url.query.contains(f.option)) continue;
    auto text = read_pem(c, f.option, f.path, f.holds);
    if (!text) return text.status();
    f.pem = std::move(*text);
  }
  return c;
}

namespace {

constexpr std::string_view paths_root = ".paths/";

std::string escaped(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char ch : name) {
    if (ch == '%') out += "%25";
    else if (ch == '/') out += "%2F";
    else out += ch;
  }
  return out;
}

}  // namespace

std::string name_range(std::string_view root, std::string_view name) {
  if (name.find('/') == std::string_view::npos) return std::string(root) + "/" + std::string(name) + "/";
  return std::string(root) + std::string(paths_root) + escaped(name) + "/";
}

std::optional<std::string> name_of_segment(std::string_view segment, bool paths) {
  if (segment.empty() || segment.find('/') != std::string_view::npos) return std::nullopt;
  if (!paths) return std::string(segment);
  std::string name;
  for (std::size_t i = 0; i < segment.size(); ++i) {
    if (segment[i] != '%') {
      name += segment[i];
      continue;
    }
    const std::string_view code = segment.substr(i + 1, 2);
    if (code == "25") name += '%';
    else if (code == "2F") name += '/';
    else return std::nullopt;
    i += 2;
  }
  if (name.find('/') == std::string::npos) return std::nullopt;  // such a name lives in the plain root
  return name;
}

std::optional<std::string> segment_prefix(std::string_view prefix, bool paths) {
  if (!paths) return prefix.find('/') == std::string_view::npos ? std::optional<std::string>(prefix) : std::nullopt;
  // Each character escapes on its own, so a name starts with `prefix`
  // exactly when its escape starts with the escape of `prefix`.
  return escaped(prefix);
}

std::string lock_prefix(const Config& config, std::string_view name) { return name_range(config.prefix, name); }

std::string kind_root(const Config& config, std::string_view kind) {
  return config.prefix + "." + std::string(kind) + "/";
}

std::string kind_prefix(const Config& config, std::string_view kind, std::string_view name) {
  return name_range(config.prefix + "." + std::string(kind), name);
}

}  // namespace dlock::detail::etcd
