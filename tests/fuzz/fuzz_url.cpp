// Fuzzes the store URL parser (core/url.h). Beyond not crashing: a URL that
// parses has a redacted form that parses again to the same parts, with the
// password (if any) and secret-bearing query values as "***"; so what the
// client shows in messages and logs is itself a valid URL naming the same
// store, and never the secret.
#include "core/url.h"

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using dlock::detail::parse_url;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto url = parse_url(text);
  if (!url) return 0;
  const std::string shown = url->redacted();
  auto again = parse_url(shown);
  if (!again) std::abort();  // the redacted form must parse
  if (again->scheme != url->scheme || again->user != url->user || again->path != url->path ||
      again->query.size() != url->query.size() || again->endpoints.size() != url->endpoints.size())
    std::abort();
  for (const auto& [key, value] : url->query) {
    auto it = again->query.find(key);
    if (it == again->query.end() || (it->second != value && it->second != "***")) std::abort();
  }
  for (std::size_t i = 0; i < url->endpoints.size(); ++i)
    if (again->endpoints[i].host != url->endpoints[i].host || again->endpoints[i].port != url->endpoints[i].port)
      std::abort();
  if (url->password.has_value() != again->password.has_value()) std::abort();
  if (url->password && *again->password != "***") std::abort();
  return 0;
}
