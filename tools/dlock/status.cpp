// dlock status — the locks held in a store.
#include "commands.h"

#include <dlock/dlock.h>

#include <cstdio>
#include <iostream>

namespace dlock::cli {
namespace {

struct StatusArgs {
  std::string backend;
  std::string prefix;
  bool json = false;
};

int status_cmd(const StatusArgs& args) {
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

void add_status(CLI::App& app, int& status) {
  auto args = std::make_shared<StatusArgs>();
  auto* cmd = app.add_subcommand("status", "List the locks held in a store");
  cmd->add_option("--backend", args->backend, "Store URL (default: $DLOCK_BACKEND or a per-user file:// dir)");
  cmd->add_option("prefix", args->prefix, "Only names starting with this");
  cmd->add_flag("--json", args->json, "Print JSON");
  cmd->callback([args, &status] { status = status_cmd(*args); });
}

}  // namespace dlock::cli
