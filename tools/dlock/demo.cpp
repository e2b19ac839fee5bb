// dlock demo — the flash sale from the write-ups, side by side on one store.
//
// Several processes sell the same 5,000 items. Without a lock, and with a
// per-process std::mutex, they sell more than there is; with a dlock mutex
// they sell exactly the stock; with segmented stock (one lock per segment)
// exactly and faster; and a single conditional decrement in the store (no
// lock at all) is shown as the baseline that says when a lock is the wrong
// tool. See flash_sale.h for what each mode does.
#include "commands.h"
#include "flash_sale.h"
#include "stock_store.h"
#include "latency.h"

#include "core/url.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>

namespace dlock::cli {
namespace {

struct DemoArgs {
  std::string backend;
  bool backend_given = false;
  int processes = 4;
  int threads = 2;
  std::int64_t stock = 5000;
  std::string work = "100us";
  int segments = 8;
  std::string time_limit = "60s";
  std::vector<std::string> modes;
  std::string stock_in;  // empty: default_stock_store(backend)
  bool json = false;
};

std::string verdict(const SaleResult& r, std::int64_t stock, const SaleResult* dlock_result) {
  char buf[320];
  const std::string name = to_string(r.mode);
  if (r.time_limit_hit)
    return name + ": INCOMPLETE — the time limit ended the run after " + std::to_string(r.orders) + " orders";
  if (r.oversold > 0) {
    std::snprintf(buf, sizeof buf, "%s: OVERSOLD by %lld (%llu orders for %lld items)%s", name.c_str(),
                  static_cast<long long>(r.oversold), static_cast<unsigned long long>(r.orders),
                  static_cast<long long>(stock),
                  r.mode == SaleMode::none    ? " — no lock: buyers read the same stock and overwrite each other"
                  : r.mode == SaleMode::local ? " — a std::mutex protects the threads of one process only"
                                              : " — BUG: a lock did not exclude");
    return buf;
  }
  if (!r.exact(stock)) {
    std::snprintf(buf, sizeof buf, "%s: %llu orders, %lld items left — %s", name.c_str(),
                  static_cast<unsigned long long>(r.orders), static_cast<long long>(r.stock_left),
                  r.mode == SaleMode::none || r.mode == SaleMode::local ? "lost updates" : "BUG: not exact");
    return buf;
  }
  switch (r.mode) {
    case SaleMode::none:
    case SaleMode::local:
      return name + ": exact this time — no contention happened (try more --processes or a longer --work)";
    case SaleMode::dlock: return name + ": exact";
    case SaleMode::segmented:
      if (dlock_result && dlock_result->orders_per_s > 0) {
        std::snprintf(buf, sizeof buf, "%s: exact, %.1f× dlock's orders/s", name.c_str(),
                      r.orders_per_s / dlock_result->orders_per_s);
        return buf;
      }
      return name + ": exact";
    case SaleMode::atomic:
      return name +
             ": exact — baseline, no lock at all: one conditional decrement in the store. When the store can "
             "check and write in one step, a lock is the wrong tool; use one when the critical section spans "
             "several steps or systems.";
    case SaleMode::pessimistic:
      return name +
             ": exact, no distributed lock — the database's row lock (SELECT … FOR UPDATE) held for the order's "
             "transaction. Right when the stock and the order's writes live in that one database.";
    case SaleMode::optimistic:
      std::snprintf(buf, sizeof buf,
                    "%s: exact, no lock — a version check on the UPDATE; %llu sales were redone after losing a race "
                    "(cheap when conflicts are rare, wasteful under a flash sale's contention).",
                    name.c_str(), static_cast<unsigned long long>(r.retries));
      return buf;
  }
  return name;
}

// The demo's settings and modes, checked before anything starts (no I/O):
// CLI::ValidationError naming the bad argument.
struct DemoPlan {
  SaleConfig config;
  std::vector<SaleMode> modes;
};
DemoPlan plan_demo(const DemoArgs& args) {
  DemoPlan plan;
  SaleConfig& config = plan.config;
  config.backend = store_url(args.backend, args.backend_given);
  config.processes = args.processes;
  config.threads = args.threads;
  config.stock = args.stock;
  config.work = work_arg(args.work, "--work");
  config.segments = args.segments;
  config.time_limit = duration_arg(args.time_limit, "--time-limit");
  config.stock_in = args.stock_in.empty() ? default_stock_store(config.backend) : args.stock_in;
  if (config.time_limit.count() <= 0) throw CLI::ValidationError("--time-limit: must be > 0");

  // pessimistic and optimistic need a database to keep the stock in.
  const bool transactions = config.stock_in == "postgres" || config.stock_in == "mysql";
  std::vector<SaleMode>& modes = plan.modes;
  for (const auto& m : args.modes) {
    auto mode = parse_sale_mode(m);
    if (!mode)
      throw CLI::ValidationError("--modes: unknown mode '" + m +
                                 "' (none, local, dlock, segmented, atomic, pessimistic, optimistic)");
    if (needs_transactions(*mode) && !transactions)
      throw CLI::ValidationError("--modes: '" + m + "' needs the stock in a database (a postgres:// or mysql:// --backend); it is in " +
                                 config.stock_in);
    modes.push_back(*mode);
  }
  if (modes.empty())
    for (SaleMode m : all_sale_modes)
      if (transactions || !needs_transactions(m)) modes.push_back(m);

  return plan;
}

// On file:// each lock name the sale used (the product's and its segments')
// is a file in the lock directory, kept there after its last holder so its
// fencing tokens keep increasing. The demo's names are fresh per run and
// never used again: remove them, or every run leaves its lock files behind.
// Called once every worker process has exited, so none is held.
void remove_lock_files(const std::string& backend, const std::string& product) {
  auto url = detail::parse_url(backend);
  if (!url || url->scheme != "file") return;
  // The stem ("flash-<pid>-<ms>") needs no escaping in a file name, and no
  // other run's names start with it.
  const std::string stem = product.substr(0, product.find(':'));
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(url->path, ec))
    if (entry.is_regular_file(ec) && entry.path().filename().string().starts_with(stem))
      std::filesystem::remove(entry.path(), ec);
}

int demo(const DemoArgs& args, DemoPlan plan) {
  SaleConfig& config = plan.config;
  const std::vector<SaleMode>& modes = plan.modes;
  config.product = fresh_product_name("sku-1001");
  if (config.threads < 2 && std::find(modes.begin(), modes.end(), SaleMode::local) != modes.end())
    std::fprintf(stderr, "dlock demo: note: with --threads 1 the per-process mutex of mode 'local' is never contended\n");
  if (!args.json) {
    std::printf("dlock demo — flash sale: %lld items of one product, %d processes × %d buyer threads, %s of "
                "simulated work per order (read → work → write)\nbackend: %s   stock in: %s\n\n",
                static_cast<long long>(config.stock), config.processes, config.threads, args.work.c_str(),
                printable_url(config.backend).c_str(), config.stock_in.c_str());
    std::printf("%-12s %8s %9s %10s %9s %9s %10s\n", "mode", "orders", "oversold", "orders/s", "p50 ms", "p99 ms",
                "stock left");
    std::fflush(stdout);
  }

  std::vector<SaleResult> results;
  for (SaleMode mode : modes) {
    results.push_back(run_sale(config, mode));
    const auto& r = results.back();
    if (!args.json) {
      std::printf("%-12s %8llu %9lld %10.0f %9.3f %9.3f %10lld%s\n", to_string(mode),
                  static_cast<unsigned long long>(r.orders), static_cast<long long>(r.oversold), r.orders_per_s,
                  to_us(r.p50) / 1e3, to_us(r.p99) / 1e3, static_cast<long long>(r.stock_left),
                  r.time_limit_hit ? "  (time limit)" : "");
      std::fflush(stdout);
    }
  }

  const SaleResult* dlock_result = nullptr;
  for (const auto& r : results)
    if (r.mode == SaleMode::dlock) dlock_result = &r;
  bool broken = false;
  for (const auto& r : results)
    if (r.mode != SaleMode::none && r.mode != SaleMode::local && !r.exact(config.stock)) broken = true;
  // (pessimistic, optimistic and atomic must be exact too: the database protects them.)

  if (args.json) {
    std::cout << sale_json(config, results, {}) << "\n";
  } else {
    std::printf("\n");
    for (const auto& r : results) std::printf("%s\n", verdict(r, config.stock, dlock_result).c_str());
    std::printf("\nlatency is per order, from the first attempt to the write (and unlock). segmented: %d segments "
                "\"<product>:seg:<i>\".\n",
                config.segments);
  }
  remove_lock_files(config.backend, config.product);
  // A locking mode that is not exact is a bug in dlock (or an incomplete run): say so in the exit status.
  return broken ? 1 : 0;
}

}  // namespace

void add_demo(CLI::App& app, Chosen& chosen) {
  auto args = std::make_shared<DemoArgs>();
  auto* cmd = app.add_subcommand("demo", "Flash sale: several processes sell one product's stock, with and without locks");
  auto* backend =
      cmd->add_option("--backend", args->backend, "Store URL (default: $DLOCK_BACKEND or a per-user file:// dir)")
          ->type_name("URL");
  cmd->add_option("--processes,-p", args->processes, "Worker processes (default 4)")->check(CLI::Range(1, 256));
  cmd->add_option("--threads", args->threads, "Buyer threads per process (default 2)")->check(CLI::Range(1, 64));
  cmd->add_option("--stock,-n", args->stock, "Items to sell (default 5000)")->check(CLI::Range(1, 100'000'000));
  cmd->add_option("--work", args->work, "Simulated work per order, between read and write (default 100us)");
  cmd->add_option("--segments", args->segments, "Segments in segmented mode (default 8)")
      ->check(CLI::Range(1, max_segments));
  cmd->add_option("--time-limit", args->time_limit, "Hard limit per mode; reported if hit (default 60s)");
  cmd->add_option("--modes", args->modes,
                  "Comma-separated: none,local,dlock,segmented,atomic, and with the stock in a database "
                  "pessimistic,optimistic (default all the store can do)")
      ->delimiter(',');
  cmd->add_option("--stock-in", args->stock_in,
                  "Where the stock lives: memory (shared by the worker processes), redis (the backend's server) or "
                  "postgres or mysql (a db_stock table in the backend's database); default: the backend's store, else memory")
      ->check(CLI::IsMember(stock_store_kinds()));
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->footer("Exit status: 0; 1 if a protected mode (dlock, segmented, atomic, pessimistic, optimistic) did not sell\n"
              "exactly the stock;\n"
              "70 if a worker process failed or crashed.");
  cmd->callback([args, backend, &chosen] {
    args->backend_given = backend->count() > 0;
    DemoPlan plan = plan_demo(*args);
    chosen = [args, plan] { return demo(*args, plan); };
  });
}

}  // namespace dlock::cli
