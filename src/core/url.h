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

// `text` fit to print whether it parses or not: redacted() if it does;
// else the text with what stands between "user:" and "@" and the values
// of secret-looking query options ("password=", "...key=") as "***".
std::string printable_url(std::string_view text);

}  // namespace dlock::detail
