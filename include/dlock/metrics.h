// dlock/metrics.h — a client's counters in the Prometheus text format.
//
// Example (an HTTP handler of the service's own serving /metrics):
//   std::string body = dlock::metrics_text(*client);
//
// Every counter of ClientStats is a `dlock_<name>_total` counter and the
// acquire latency a `dlock_acquire_duration_seconds` histogram, each with
// a `backend` label (the client's scheme) and, if given, `extra_labels`
// (e.g. `instance="orders-1"`: name="value" pairs separated by commas,
// passed through as they are). Thread-safe; no remote call.
#pragma once

#include <dlock/client.h>

#include <string>
#include <string_view>

namespace dlock {

std::string metrics_text(const Client& client, std::string_view extra_labels = {});

// The same for counters read earlier (e.g. summed over several clients).
std::string metrics_text(const ClientStats& stats, std::string_view backend, std::string_view extra_labels = {});

}  // namespace dlock
