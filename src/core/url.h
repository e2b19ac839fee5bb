// url.h — parses store URLs: scheme://[user[:password]@]host[:port][,host[:port]...][/path][?k=v&...]
#pragma once

#include <dlock/status.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::detail {

struct Endpoint {
  std::string host;                  // without IPv6 brackets
  std::optional<std::uint16_t> port;
};

struct Url {
  std::string scheme;                // lower case
  std::optional<std::string> user;   // percent-decoded
  std::optional<std::string> password;
  std::vector<Endpoint> endpoints;   // empty for file:///dir
  std::string path;                  // percent-decoded, starts with '/' or empty
  std::map<std::string, std::string> query;

  // The URL with the password replaced by "***": safe for errors and logs.
  std::string redacted() const;
};

// Errors name the part that is wrong and never echo a password.
Result<Url> parse_url(std::string_view text);

// password_file=PATH, an option every store takes: the password is read
// from PATH (one line; a trailing newline is dropped) instead of being
// written in the URL, where it would show in /proc/<pid>/cmdline and in
// shell histories. PATH must be a regular file (not a symlink) of this
// user (or root) that nobody else may read or write. The option is taken
// out of `url` and the password put in; invalid_argument naming the path
// and the fix if the file is refused, or if the URL has a password too.
Status take_password_file(Url& url);

// `text` fit to print whether it parses or not: redacted() if it does;
// else the text with what stands between "user:" and "@" and the values
// of secret-looking query options ("password=", "...key=") as "***".
std::string printable_url(std::string_view text);

}  // namespace dlock::detail
