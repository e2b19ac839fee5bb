#include "core/url.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cctype>
#include <cstring>
#include <charconv>

namespace dlock::detail {
namespace {

Result<std::string> percent_decode(std::string_view s, std::string_view part) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    if (i + 2 >= s.size() || hex(s[i + 1]) < 0 || hex(s[i + 2]) < 0)
      return Result<std::string>(errc::invalid_argument, "url: bad percent-escape in the " + std::string(part));
    out.push_back(static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2])));
    i += 2;
  }
  return out;
}

Status invalid(std::string why) { return Status(errc::invalid_argument, "url: " + std::move(why)); }

bool has_control_character(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  return false;
}

// Whether `after` (what follows the host part) has an '@' in its path or in
// its first query key: there it can only be a password's remainder.
bool at_sign_after_host(std::string_view after) {
  auto q = after.find('?');
  std::string_view path = after.substr(0, q);
  std::string_view query = q == std::string_view::npos ? std::string_view{} : after.substr(q + 1);
  std::string_view first_key = query.substr(0, query.find_first_of("=&"));
  return path.find('@') != std::string_view::npos || first_key.find('@') != std::string_view::npos;
}

// Query keys whose values are secrets, whatever their case: names that end
// in a secret word ("password", "auth_token", "apikey"), but not
// "token_retention".
bool is_secret_key(std::string key) {
  for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (std::string_view word : {"pass", "password", "passwd", "secret", "token", "key", "auth", "credential",
                                "credentials"})
    if (key.ends_with(word)) return true;
  return false;
}

// `s` with every byte in `special`, space and control characters as %XX,
// so that parse_url() reads it back as `s`. Other bytes (UTF-8 included)
// stay as they are, for display.
std::string percent_encode(std::string_view s, std::string_view special) {
  static constexpr char digits[] = "0123456789ABCDEF";
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f || special.find(c) != std::string_view::npos) {
      out += '%';
      out += digits[u >> 4];
      out += digits[u & 15];
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string Url::redacted() const {
  std::string out = scheme + "://";
  // Decoded parts are encoded again where they could be misread: the
  // result parses back to this URL (with "***" for secrets).
  if (user || password) {
    out += percent_encode(user.value_or(""), "%@:/?");
    if (password) out += ":***";
    out += "@";
  }
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    if (i) out += ",";
    const auto& e = endpoints[i];
    out += e.host.find(':') != std::string::npos ? "[" + e.host + "]" : e.host;
    if (e.port) out += ":" + std::to_string(*e.port);
  }
  out += percent_encode(path, "%?@");
  char sep = '?';
  for (const auto& [k, v] : query) {
    out += sep + percent_encode(k, "%&=@") + "=" + (is_secret_key(k) ? "***" : percent_encode(v, "%&=@"));
    sep = '&';
  }
  return out;
}

Result<Url> parse_url(std::string_view text) {
  Url url;
  if (text.empty()) return invalid("is empty");
  for (char c : text)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == ' ')
      return invalid("contains a space or control character");
  auto colon = text.find("://");
  if (colon == std::string_view::npos || colon == 0)
    return invalid("missing scheme (expected scheme://..., e.g. file:///var/lib/locks)");
  for (char c : text.substr(0, colon)) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.'))
      return invalid("scheme '" + std::string(text.substr(0, colon)) + "' has invalid characters");
    url.scheme.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  std::string_view rest = text.substr(colon + 3);

  // Query.
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    std::string_view query = rest.substr(q + 1);
    rest = rest.substr(0, q);
    while (!query.empty()) {
      auto amp = query.find('&');
      std::string_view pair = query.substr(0, amp);
      query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
      if (pair.empty()) continue;
      auto eq = pair.find('=');
      if (eq == 0) return invalid("query parameter without a name");
      auto key = percent_decode(pair.substr(0, eq), "query");
      if (!key) return key.status();
      auto value = percent_decode(eq == std::string_view::npos ? "" : pair.substr(eq + 1), "query");
      if (!value) return value.status();
      if (url.query.count(*key)) return invalid("query parameter '" + *key + "' given twice");
      url.query[*key] = *value;
    }
  }

  // Authority and path.
  auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  // A raw '/' or '?' in a password would cut the authority short and put
  // the rest of the password in the path or query: refuse, without echoing.
  if (!authority.empty() && authority.find('@') == std::string_view::npos &&
      at_sign_after_host(text.substr(colon + 3 + authority.size())))
    return invalid(
        "'@' after the host part: percent-encode '/', '?' and '@' in a user name or password "
        "(%2F, %3F, %40)");
  if (slash != std::string_view::npos) {
    auto path = percent_decode(rest.substr(slash), "path");
    if (!path) return path.status();
    if (has_control_character(*path)) return invalid("the path contains a control character (after decoding)");
    url.path = *path;
  }

  if (auto at = authority.rfind('@'); at != std::string_view::npos) {
    std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    auto c = userinfo.find(':');
    auto user = percent_decode(userinfo.substr(0, c), "user name");
    if (!user) return user.status();
    if (!user->empty()) url.user = *user;
    if (c != std::string_view::npos) {
      auto pass = percent_decode(userinfo.substr(c + 1), "password");
      if (!pass) return pass.status();
      url.password = *pass;
    }
  }

  while (!authority.empty()) {
    auto comma = authority.find(',');
    std::string_view hostport = authority.substr(0, comma);
    authority = comma == std::string_view::npos ? std::string_view{} : authority.substr(comma + 1);
    if (comma != std::string_view::npos && authority.empty()) return invalid("trailing ',' in the host list");
    if (hostport.empty()) return invalid("empty host in the host list");
    Endpoint e;
    std::string_view port;
    if (hostport.front() == '[') {
      auto close = hostport.find(']');
      if (close == std::string_view::npos) return invalid("IPv6 address without closing ']'");
      e.host = std::string(hostport.substr(1, close - 1));
      if (e.host.empty()) return invalid("empty IPv6 address");
      // Brackets hold an IPv6 address only: hex digits, ':' and '.', then
      // perhaps a zone after '%' ("fe80::1%25eth0").
      const std::string_view address = std::string_view(e.host).substr(0, e.host.find('%'));
      const std::string_view zone = std::string_view(e.host).substr(address.size());
      if (address.find(':') == std::string_view::npos ||
          address.find_first_not_of("0123456789abcdefABCDEF:.") != std::string_view::npos ||
          zone.find_first_of("[]@/?#,") != std::string_view::npos)
        return invalid("host " + std::to_string(url.endpoints.size() + 1) + ": only an IPv6 address goes in brackets");
      std::string_view after = hostport.substr(close + 1);
      if (!after.empty()) {
        if (after.front() != ':') return invalid("unexpected text after ']'");
        port = after.substr(1);
        if (port.empty()) return invalid("empty port after ':'");
      }
    } else {
      auto c = hostport.rfind(':');
      if (c != std::string_view::npos && hostport.find(':') != c)
        return invalid("IPv6 addresses must be written in brackets, e.g. [::1]:6379");
      e.host = std::string(hostport.substr(0, c));
      if (c != std::string_view::npos) {
        port = hostport.substr(c + 1);
        if (port.empty()) return invalid("empty port after ':'");
      }
      if (e.host.empty()) return invalid("missing host before ':'");
    }
    if (!port.empty()) {
      unsigned value = 0;
      auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
      // The text is not echoed: a mistyped URL may have a password here.
      if (ec != std::errc{} || ptr != port.data() + port.size())
        return invalid("the port of host " + std::to_string(url.endpoints.size() + 1) + " is not a number");
      if (value == 0 || value > 65535) return invalid("port " + std::string(port) + " is out of range (1-65535)");
      e.port = static_cast<std::uint16_t>(value);
    }
    url.endpoints.push_back(std::move(e));
  }
  return url;
}

std::string printable_url(std::string_view text) {
  if (auto url = parse_url(text)) return url->redacted();
  std::string out(text);
  // user:password@ : from the first ':' after "://" to the last '@' (a
  // password with a raw '/', '?' or '#' is what most often keeps a URL
  // from parsing, so the '@' is looked for in the whole text; hiding too
  // much is fine).
  const auto scheme_end = out.find("://");
  const std::size_t from = scheme_end == std::string::npos ? 0 : scheme_end + 3;
  const auto at = out.rfind('@');
  if (at != std::string::npos && at >= from) {
    const auto colon = out.find(':', from);
    if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
  }
  // secret=value in the query.
  const auto query = out.find('?');
  if (query == std::string::npos) return out;
  std::string rebuilt = out.substr(0, query + 1);
  std::string_view rest = std::string_view(out).substr(query + 1);
  while (true) {
    const auto amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    const auto eq = pair.find('=');
    if (eq != std::string_view::npos && is_secret_key(std::string(pair.substr(0, eq))))
      rebuilt += std::string(pair.substr(0, eq + 1)) + "***";
    else
      rebuilt += pair;
    if (amp == std::string_view::npos) break;
    rebuilt += '&';
    rest = rest.substr(amp + 1);
  }
  return rebuilt;
}

Status take_password_file(Url& url) {
  const auto option = url.query.find("password_file");
  if (option == url.query.end()) return {};
  const std::string path = option->second;
  if (url.password) return invalid("give the password or password_file=, not both");
  if (path.empty() || path.front() != '/') return invalid("password_file='" + path + "' must be an absolute path");
  // O_NONBLOCK: a FIFO is refused below, not waited on.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    const int error = errno;
    return invalid("password_file='" + path + "' cannot be read: " +
                   (error == ELOOP ? std::string("it is a symlink") : std::string(std::strerror(error))));
  }
  struct stat st {};
  std::string problem;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    problem = "is not a regular file";
  else if (st.st_uid != ::geteuid() && st.st_uid != 0)
    problem = "belongs to another user (uid " + std::to_string(st.st_uid) + ")";
  else if (st.st_mode & (S_IRWXG | S_IRWXO))
    problem = "may be read or written by group or others (chmod 600)";
  std::string text;
  if (problem.empty()) {
    char buf[4096];
    ssize_t n = 0;
    while (text.size() <= 4096 && (n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<std::size_t>(n));
    if (n < 0) problem = std::string("cannot be read: ") + std::strerror(errno);
    else if (text.size() > 4096) problem = "is longer than 4096 bytes (it holds one password)";
  }
  ::close(fd);
  if (!problem.empty()) return invalid("password_file='" + path + "' " + problem);
  if (text.ends_with('\n')) text.pop_back();
  if (text.ends_with('\r')) text.pop_back();
  if (text.empty() || text.find('\n') != std::string::npos)
    return invalid("password_file='" + path + "' must hold the password on one line");
  url.password = std::move(text);
  url.query.erase(option);
  return {};
}

}  // namespace dlock::detail
