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
  std::string url;  // store_url's
  std::string prefix;
  bool json = false;
  bool metrics = false;
};

// The store as Prometheus gauges (for a textfile collector or a scrape
// wrapper): whether it answers, one round trip's time, and what is held in
// it now, by kind. A store that can't be reached is reported as down (exit
// status 69), not as an error message only.
int metrics_cmd(const StatusArgs& args) {
  const std::string& url = args.url;
  auto client = dlock::connect_checked(url);
  if (!client && client.status().code() != errc::unavailable) client.status().throw_if_error();  // a bad URL
  std::string backend = url.substr(0, url.find(':'));
  std::map<std::string, std::size_t> held;
  std::optional<double> ping_seconds;
  std::optional<double> shortest_lease;
  Status down = client.status();  // why the store is not usable, if it is not
  if (client) {
    backend = (*client)->scheme();
    const auto start = std::chrono::steady_clock::now();
    down = (*client)->ping();
    if (down.ok()) ping_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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
    std::cerr << "dlock: " << Error(down.code(), down.message()).what() << "\n";
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
  auto client = dlock::connect(args.url);
  // A store that can't take a lock is not one with none held: on a
  // read-only lock directory, say why it is unusable (as `run` and
  // --metrics do), not "no locks held".
  client->ping().throw_if_error();
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
  // Padded by the columns the text takes on a terminal, not its bytes (printf's
  // %-32s would pad "…", three bytes, as three columns).
  const auto row = [](std::string_view name, std::string_view kind, std::string_view holder, std::string_view token,
                      std::string_view lease) {
    std::string line;
    const auto left = [&](std::string_view text, std::size_t width) {
      line += text;
      line.append(width - std::min(width, display_width(text)), ' ');
      line += ' ';
    };
    const auto right = [&](std::string_view text, std::size_t width) {
      line.append(width - std::min(width, display_width(text)), ' ');
      line += text;
    };
    left(name, 32);
    left(kind, 7);
    left(holder, 32);
    right(token, 12);
    line += ' ';
    right(lease, 10);
    std::cout << line << "\n";
  };
  row("NAME", "KIND", "HOLDER", "TOKEN", "LEASE");
  for (const auto& l : locks)
    row(terminal_text(l.name), terminal_text(l.kind), terminal_text(l.holder), std::to_string(l.token),
        l.remaining ? std::to_string(l.remaining->count()) + "ms" : "session");
  return 0;
}

}  // namespace

void add_status(CLI::App& app, Chosen& chosen) {
  auto args = std::make_shared<StatusArgs>();
  auto* cmd = app.add_subcommand("status", "List the locks held in a store");
  auto* backend =
      cmd->add_option("--backend", args->backend, "Store URL (default: $DLOCK_BACKEND or a per-user file:// dir)")
          ->type_name("URL");
  cmd->add_option("prefix", args->prefix, "Only names starting with this");
  auto* json = cmd->add_flag("--json", args->json, "Print JSON");
  cmd->add_flag("--metrics", args->metrics,
                "Print the store's state as Prometheus gauges (up, round trip, held entries by kind)")
      ->excludes(json);
  cmd->callback([args, backend, &chosen] {
    args->url = store_url(args->backend, backend->count() > 0);
    chosen = [args] { return status_cmd(*args); };
  });
}

}  // namespace dlock::cli
