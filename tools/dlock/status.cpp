// dlock status — the locks held in a store.
#include "commands.h"

#include <dlock/dlock.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>

namespace dlock::cli {
namespace {

struct StatusArgs {
  std::string backend;
  std::string prefix;
  bool json = false;
  bool metrics = false;
};

// The store as Prometheus gauges (for a textfile collector or a scrape
// wrapper): whether it answers, one round trip's time, and what is held in
// it now, by kind. A store that can't be reached is reported as down (exit
// status 69), not as an error message only.
int metrics_cmd(const StatusArgs& args) {
  const std::string url = args.backend.empty() ? default_backend() : args.backend;
  auto client = dlock::connect_checked(url);
  if (!client && client.status().code() != errc::unavailable) client.status().throw_if_error();  // a bad URL
  std::string backend = url.substr(0, url.find(':'));
  std::map<std::string, std::size_t> held;
  std::optional<double> ping_seconds;
  std::optional<double> shortest_lease;
  if (client) {
    backend = (*client)->scheme();
    const auto start = std::chrono::steady_clock::now();
    if ((*client)->ping().ok())
      ping_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  if (ping_seconds) {
    for (const auto& l : (*client)->list_locks(args.prefix)) {
      ++held[l.kind];
      if (l.remaining) {
        const double left = std::chrono::duration<double>(*l.remaining).count();
        shortest_lease = shortest_lease ? std::min(*shortest_lease, left) : left;
      }
    }
  }
  const std::string labels = "backend=" + prometheus_label(backend);
  std::cout << "# HELP dlock_store_up Whether the store answered a round trip (1) or not (0).\n"
            << "# TYPE dlock_store_up gauge\n"
            << "dlock_store_up{" << labels << "} " << (ping_seconds ? 1 : 0) << "\n";
  if (!ping_seconds) {
    std::cerr << "dlock status: " << (client ? "the store did not answer" : client.status().message()) << "\n";
    return exit_unavailable;
  }
  std::cout << "# HELP dlock_store_round_trip_seconds One round trip to the store with no lock logic.\n"
            << "# TYPE dlock_store_round_trip_seconds gauge\n"
            << "dlock_store_round_trip_seconds{" << labels << "} " << *ping_seconds << "\n"
            << "# HELP dlock_held Entries held in the store now, by kind (locks, permits, leaders, members).\n"
            << "# TYPE dlock_held gauge\n";
  if (held.empty()) held["mutex"] = 0;  // one sample, so the series exists while nothing is held
  for (const auto& [kind, n] : held)
    std::cout << "dlock_held{" << labels << ",kind=" << prometheus_label(kind) << "} " << n << "\n";
  if (shortest_lease)
    std::cout << "# HELP dlock_lease_remaining_min_seconds The shortest lease left among the held entries.\n"
              << "# TYPE dlock_lease_remaining_min_seconds gauge\n"
              << "dlock_lease_remaining_min_seconds{" << labels << "} " << *shortest_lease << "\n";
  return 0;
}

int status_cmd(const StatusArgs& args) {
  if (args.metrics) return metrics_cmd(args);
  auto client = dlock::connect(args.backend.empty() ? default_backend() : args.backend);
  auto locks = client->list_locks(args.prefix);
  if (args.json) {
    std::cout << "[";
    for (std::size_t i = 0; i < locks.size(); ++i) {
      const auto& l = locks[i];
      std::cout << (i ? ",\n " : "") << "{\"name\":" << json_string(l.name) << ",\"kind\":" << json_string(l.kind)
                << ",\"holder\":" << json_string(l.holder)
                << ",\"token\":" << l.token << ",\"remaining_ms\":"
                << (l.remaining ? std::to_string(l.remaining->count()) : "null") << "}";
    }
    std::cout << "]\n";
    return 0;
  }
  if (locks.empty()) {
    std::cout << "no locks held" << (args.prefix.empty() ? "" : " with prefix '" + args.prefix + "'") << " in "
              << client->url() << "\n";
    return 0;
  }
  std::printf("%-32s %-7s %-32s %12s %10s\n", "NAME", "KIND", "HOLDER", "TOKEN", "LEASE");
  for (const auto& l : locks) {
    std::string lease = l.remaining ? std::to_string(l.remaining->count()) + "ms" : "session";
    std::printf("%-32s %-7s %-32s %12llu %10s\n", l.name.c_str(), l.kind.c_str(), l.holder.c_str(),
                static_cast<unsigned long long>(l.token), lease.c_str());
  }
  return 0;
}

}  // namespace

void add_status(CLI::App& app, Chosen& chosen) {
  auto args = std::make_shared<StatusArgs>();
  auto* cmd = app.add_subcommand("status", "List the locks held in a store");
  cmd->add_option("--backend", args->backend, "Store URL (default: $DLOCK_BACKEND or a per-user file:// dir)");
  cmd->add_option("prefix", args->prefix, "Only names starting with this");
  auto* json = cmd->add_flag("--json", args->json, "Print JSON");
  cmd->add_flag("--metrics", args->metrics,
                "Print the store's state as Prometheus gauges (up, round trip, held entries by kind)")
      ->excludes(json);
  // Nothing to check beyond what CLI11 does (the URL is read when connecting).
  cmd->callback([args, &chosen] { chosen = [args] { return status_cmd(*args); }; });
}

}  // namespace dlock::cli
