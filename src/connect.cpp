#include <dlock/client.h>

#include "core/client_state.h"
#include "core/owner_id.h"
#include "core/registry.h"
#include "core/validate.h"

namespace dlock {

namespace detail {

const BackendEntry* find_backend(std::string_view scheme) {
  for (const auto& entry : registered_backends())
    if (entry.scheme == scheme) return &entry;
  return nullptr;
}

Result<std::unique_ptr<Backend>> open_backend(const Url& given, const ClientOptions& options) {
  Url url = given;
  if (Status s = take_password_file(url); !s) return s;
  if (const BackendEntry* entry = find_backend(url.scheme)) return entry->open(url, options);
  std::string known;
  for (const auto& entry : registered_backends()) known += (known.empty() ? "" : ", ") + std::string(entry.scheme);
  return Status(errc::invalid_argument, "url: unknown scheme '" + url.scheme + "' (this build has: " + known + ")");
}

}  // namespace detail

Result<std::shared_ptr<Client>> connect_checked(std::string_view url_text, ClientOptions options) {
  if (Status s = detail::validate(options); !s) return s;
  auto url = detail::parse_url(url_text);
  if (!url) return url.status();
  auto backend = detail::open_backend(*url, options);
  if (!backend) return backend.status();
  auto id = detail::random_client_id();
  if (!id) return id.status();
  auto state = std::make_shared<detail::ClientState>(std::move(*backend), std::move(*id), url->redacted(),
                                                     url->scheme, options);
  return detail::make_client(std::move(state));
}

std::shared_ptr<Client> connect(std::string_view url, ClientOptions options) {
  return connect_checked(url, options).value();
}

std::vector<std::string> backends() {
  std::vector<std::string> out;
  for (const auto& entry : detail::registered_backends()) out.emplace_back(entry.scheme);
  return out;
}

}  // namespace dlock
