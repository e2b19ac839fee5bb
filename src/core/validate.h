// validate.h — the generic checks every name and option passes before any I/O.
#pragma once

#include <dlock/client.h>
#include <dlock/options.h>
#include <dlock/status.h>

#include <chrono>
#include <cstddef>
#include <string_view>
#include <vector>

namespace dlock::detail {

// Longest lock name in bytes on any backend; a backend may allow less.
inline constexpr std::size_t max_name_bytes = 512;
// Longest lease accepted.
inline constexpr std::chrono::milliseconds max_lease = std::chrono::hours(24);

// Non-empty, at most max_name_bytes, valid UTF-8, no control characters.
Status validate_name(std::string_view name);
Status validate(const MutexOptions& options);
Status validate(const ClientOptions& options);

// The '/'-separated segments of `path` (no leading '/'), empty ones kept so
// that a backend's check refuses them (ZooKeeper paths, etcd key prefixes).
std::vector<std::string_view> path_segments(std::string_view path);

// renew_interval with 0 resolved to lease / 3.
std::chrono::milliseconds renew_interval(const MutexOptions& options);

}  // namespace dlock::detail
