// dlock_nemesis_soak — long random schedules of every fault a backend
// claims (tests/fault/soak.sh runs it per backend and prints the table).
//
//   dlock_nemesis_soak --backend NAME|URL [--minutes N] [--seed S] [--all-faults] [--header] [--history FILE]
//
// NAME is a backend of nemesis_backends() (file, sqlite, redis, redis_aof,
// redis_sentinel, redis_cluster, redlock, zookeeper, etcd, postgres,
// postgres_session, mysql, mysql_session); a URL picks one by its scheme
// and mode (redis+sentinel://... is redis_sentinel, postgres://...?mode=session
// postgres_session; the harness still starts a store of its own, as it
// kills it).
// Prints one row: backend, seed, minutes, operations (acquire calls),
// holds, writes, faults per kind, violations, double grants the topology
// may make by design (NemesisBackend::double_grant), longest
// unavailability, lost locks reported; then each violation. Exit 1 if there was one.
// --all-faults adds the faults the backend is known to fail under
// (NemesisBackend::failing). --history copies the run's history to FILE.
#include "client_network.h"
#include "nemesis.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <string>

namespace {

std::string backend_name(std::string arg) {
  const bool session = arg.find("mode=session") != std::string::npos;
  if (auto colon = arg.find("://"); colon != std::string::npos) arg = arg.substr(0, colon);
  if (arg == "zk") arg = "zookeeper";
  if (arg == "postgresql") arg = "postgres";
  if (arg == "redis+sentinel") arg = "redis_sentinel";
  if (arg == "redis+cluster") arg = "redis_cluster";
  return session ? arg + "_session" : arg;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace dlock::test;
  std::string backend;
  double minutes = 2;
  std::uint64_t seed = std::random_device{}();
  bool header = false;
  bool all_faults = false;
  std::string history;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--backend" && i + 1 < argc) backend = backend_name(argv[++i]);
    else if (a == "--minutes" && i + 1 < argc) minutes = std::stod(argv[++i]);
    else if (a == "--seed" && i + 1 < argc) seed = std::stoull(argv[++i]);
    else if (a == "--header") header = true;
    else if (a == "--all-faults") all_faults = true;
    else if (a == "--history" && i + 1 < argc) history = argv[++i];
    else {
      std::cerr << "usage: dlock_nemesis_soak --backend NAME|URL [--minutes N] [--seed S] [--all-faults] [--header]"
                   " [--history FILE]\n";
      return 64;
    }
  }
  const NemesisBackend* b = find_nemesis_backend(backend);
  if (!b) {
    std::cerr << "dlock_nemesis_soak: no backend '" << backend << "' in this build\n";
    return 64;
  }
  NemesisBackend chosen = *b;
  std::string note;
  if (all_faults) chosen.faults.insert(chosen.faults.end(), chosen.failing.begin(), chosen.failing.end());
  if (auto why = ClientNetwork::unavailable_reason(); !why.empty()) {
    std::erase(chosen.faults, Fault::partition);
    note = " (no partitions: " + why + ")";
  }
  if (auto why = ClientNetwork::degrade_unavailable_reason(); !why.empty() && std::erase(chosen.faults, Fault::lossy_network))
    note += " (no lossy network: " + why + ")";
  const auto run = std::chrono::milliseconds(static_cast<long>(minutes * 60'000));
  const auto report = run_nemesis(chosen, {.faults = chosen.faults, .run = run, .seed = seed});
  if (!history.empty()) std::ofstream(history) << report.history;  // also when the run broke off
  if (!report.error.empty()) {
    std::cerr << "dlock_nemesis_soak: " << backend << ": " << report.error << "\n";
    return 2;
  }
  const auto& c = report.check;
  auto fault = [&](Fault f) {
    auto it = c.faults.find(to_string(f));
    return it == c.faults.end() ? std::string("-") : std::to_string(it->second);
  };
  if (header)
    std::printf("%-16s %10s %5s %6s %6s %7s %6s %6s %6s %6s %6s %6s %6s %5s %5s %9s %5s\n", "backend", "seed",
                "min", "ops", "holds", "writes", "p-cli", "k-cli", "p-srv", "r-srv", "part", "lossy", "fail", "viol",
                "dbl", "unavail", "lost");
  std::printf("%-16s %10llu %5.1f %6llu %6llu %7llu %6s %6s %6s %6s %6s %6s %6s %5zu %5llu %7.2fs %5llu%s\n",
              backend.c_str(),
              static_cast<unsigned long long>(seed), minutes, static_cast<unsigned long long>(c.acquires),
              static_cast<unsigned long long>(c.acquired), static_cast<unsigned long long>(c.writes_accepted),
              fault(Fault::pause_client).c_str(), fault(Fault::kill_client).c_str(), fault(Fault::pause_server).c_str(),
              fault(Fault::restart_server).c_str(), fault(Fault::partition).c_str(), fault(Fault::lossy_network).c_str(),
              fault(Fault::failover).c_str(),
              c.violations.size(), static_cast<unsigned long long>(c.double_grants),
              static_cast<double>(c.longest_unavailable_us) / 1e6, static_cast<unsigned long long>(c.lost),
              note.c_str());
  for (const auto& v : c.violations) std::printf("  violation: %s\n", v.c_str());
  return c.ok() ? 0 : 1;
}
