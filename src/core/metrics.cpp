// The Prometheus text exposition format (version 0.0.4): # HELP and # TYPE
// lines, then samples `name{labels} value`.
#include <dlock/metrics.h>

#include <cstdio>
#include <string>

namespace dlock {
namespace {

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// Escapes a label value: backslash, double quote and newline.
std::string escaped(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

std::string metrics_text(const ClientStats& s, std::string_view backend, std::string_view extra_labels) {
  std::string labels = "backend=\"" + escaped(backend) + "\"";
  if (!extra_labels.empty()) labels += "," + std::string(extra_labels);
  std::string out;
  auto counter = [&](std::string_view name, std::string_view help, std::uint64_t value) {
    out += "# HELP dlock_" + std::string(name) + "_total " + std::string(help) + "\n";
    out += "# TYPE dlock_" + std::string(name) + "_total counter\n";
    out += "dlock_" + std::string(name) + "_total{" + labels + "} " + std::to_string(value) + "\n";
  };
  counter("acquisitions", "Locks, permits and leaderships granted by the store (re-entries not counted).",
          s.acquisitions);
  counter("releases", "Releases the store confirmed.", s.releases);
  counter("failed_releases", "Releases that failed or had nothing to release.", s.failed_releases);
  counter("renewals", "Leases the store extended.", s.renewals);
  counter("renewal_batches", "Renewal round trips (one per batch of due leases).", s.renewal_batches);
  counter("renewal_failures", "Renewals that could not reach the store.", s.renewal_failures);
  counter("leases_lost", "Holds whose lease or session was lost while held.", s.leases_lost);
  counter("waits", "Acquisitions that found the lock busy and waited.", s.waits);
  counter("wakeups", "Waits ended by a notification from the store.", s.wakeups);
  counter("disconnects", "Connections to the store lost.", s.disconnects);
  counter("reconnects", "Connections to the store made again after a loss.", s.reconnects);

  const auto& h = s.acquire_latency;
  out += "# HELP dlock_acquire_duration_seconds Time from an acquire call to its grant, waiting included.\n";
  out += "# TYPE dlock_acquire_duration_seconds histogram\n";
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i <= h.bounds.size(); ++i) {
    cumulative += h.counts[i];
    const std::string le = i < h.bounds.size() ? number(h.bounds[i]) : "+Inf";
    out += "dlock_acquire_duration_seconds_bucket{" + labels + ",le=\"" + le + "\"} " + std::to_string(cumulative) +
           "\n";
  }
  out += "dlock_acquire_duration_seconds_sum{" + labels + "} " + number(h.sum_seconds) + "\n";
  out += "dlock_acquire_duration_seconds_count{" + labels + "} " + std::to_string(h.count) + "\n";
  return out;
}

std::string metrics_text(const Client& client, std::string_view extra_labels) {
  return metrics_text(client.stats(), client.scheme(), extra_labels);
}

}  // namespace dlock
