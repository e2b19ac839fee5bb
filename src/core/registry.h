// registry.h — the backends compiled in, listed explicitly (no static
// initialisers: they vanish when static libraries are linked).
#pragma once

#include "core/driver.h"
#include "core/url.h"

#include <memory>
#include <span>
#include <string_view>

namespace dlock::detail {

using OpenBackend = Result<std::unique_ptr<Backend>> (*)(const Url& url, const ClientOptions& options);

struct BackendEntry {
  std::string_view scheme;
  OpenBackend open;
};

// Generated from the enabled DLOCK_WITH_<BACKEND> options (src/backends.cpp.in).
std::span<const BackendEntry> registered_backends();

// Opens the backend `url` names (src/connect.cpp); invalid_argument for a
// scheme this build does not have.
Result<std::unique_ptr<Backend>> open_backend(const Url& url, const ClientOptions& options);

}  // namespace dlock::detail
