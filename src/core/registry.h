// registry.h — the backends compiled in, listed explicitly (no static
// initialisers: they vanish when static libraries are linked).
#pragma once

#include "core/driver.h"
#include "core/url.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

namespace dlock::detail {

using OpenBackend = Result<std::unique_ptr<Backend>> (*)(const Url& url, const ClientOptions& options);

struct BackendEntry {
  std::string_view scheme;
  // The scheme the store is known by: the first of its backend's schemes
  // (postgresql:// is "postgres", mariadb:// is "mysql").
  std::string_view family;
  // Where a host named without a port listens; 0 for a store with no host.
  std::uint16_t default_port;
  OpenBackend open;
};

// Generated from the enabled DLOCK_WITH_<BACKEND> options (src/backends.cpp.in).
std::span<const BackendEntry> registered_backends();

// The entry of `scheme`; nullptr if this build does not have it.
const BackendEntry* find_backend(std::string_view scheme);

// Opens the backend `url` names (src/connect.cpp); invalid_argument for a
// scheme this build does not have.
Result<std::unique_ptr<Backend>> open_backend(const Url& url, const ClientOptions& options);

}  // namespace dlock::detail
