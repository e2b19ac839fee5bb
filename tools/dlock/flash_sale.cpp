#include "flash_sale.h"

#include "commands.h"
#include "latency.h"
#include "process_group.h"
#include "stock_store.h"

#include <dlock/dlock.h>

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <mutex>
#include <random>
#include <thread>

namespace dlock::cli {
namespace {

void simulate_work(std::chrono::nanoseconds work) {
  if (work.count() > 0) std::this_thread::sleep_for(work);
}

// One item from `cell` under whatever protects it (or nothing): false if it was empty.
bool take_one(StockCell& cell, std::chrono::nanoseconds work) {
  const std::int64_t left = cell.read();  // read
  if (left <= 0) return false;
  simulate_work(work);                    // the order is being processed
  cell.write(left - 1);                   // write back
  return true;
}

// A buyer: buy() returns true for a sale, false when sold out, nullopt at the time limit.
template <class Buy>
void buyer_loop(WorkerSlot& slot, steady::time_point deadline, Buy buy) {
  StopReason why = StopReason::done;
  for (;;) {
    const auto t0 = steady::now();
    if (t0 >= deadline) {
      why = StopReason::time_limit;
      break;
    }
    std::optional<bool> sold = buy(deadline);
    if (!sold) {
      why = StopReason::time_limit;
      break;
    }
    if (!*sold) break;
    slot.latency.add(steady::now() - t0);
    ++slot.ops;
  }
  slot.stopped_by = static_cast<std::uint32_t>(why);
  slot.end_ns = steady_ns(steady::now());
}

void run_buyers(ProcessGroup& group, const SaleConfig& config, SaleMode mode, int process) {
  auto stock_store = open_stock_store(config.stock_in, group.user_area(), config.backend, config.product);
  std::shared_ptr<dlock::Client> client;
  if (mode == SaleMode::dlock || mode == SaleMode::segmented) client = dlock::connect(config.backend);
  std::mutex local;  // SaleMode::local: one per process, exactly what does not work across processes
  const auto start = group.wait_for_start();
  const auto deadline = start + config.time_limit;

  run_threads(group.threads(), [&](int thread) {
    WorkerSlot& slot = group.slot(process, thread);
    auto view = stock_store->view();  // per thread: its own connection to a remote store
    StockView& store = *view;
    switch (mode) {
      case SaleMode::none:
        buyer_loop(slot, deadline, [&](steady::time_point) -> std::optional<bool> {
          return take_one(store.stock(), config.work);
        });
        break;
      case SaleMode::local:
        buyer_loop(slot, deadline, [&](steady::time_point) -> std::optional<bool> {
          std::lock_guard hold(local);
          return take_one(store.stock(), config.work);
        });
        break;
      case SaleMode::dlock: {
        auto mutex = client->mutex(config.product, config.lock_options);
        buyer_loop(slot, deadline, [&](steady::time_point until) -> std::optional<bool> {
          std::unique_lock hold(mutex, until);  // try_lock_until: bounded by the time limit
          if (!hold) return std::nullopt;
          return take_one(store.stock(), config.work);
        });
        break;
      }
      case SaleMode::segmented: {
        std::vector<dlock::Mutex> segs;
        for (int i = 0; i < config.segments; ++i)
          segs.push_back(client->mutex(config.product + ":seg:" + std::to_string(i), config.lock_options));
        std::vector<bool> empty(static_cast<std::size_t>(config.segments), false);
        int empties = 0;
        std::minstd_rand rng(static_cast<unsigned>(::getpid()) * 7919u + static_cast<unsigned>(thread));
        // Each order starts at a random segment and takes the first free one
        // (try_lock); only if every non-empty segment is busy does it wait,
        // on the one it started at. Empty segments stay empty (only
        // decrements happen, under the segment's lock).
        auto next_nonempty = [&](int from) {
          for (int k = 0; k < config.segments; ++k) {
            int i = (from + k) % config.segments;
            if (!empty[static_cast<std::size_t>(i)]) return i;
          }
          return -1;
        };
        auto sell_from = [&](int i, std::unique_lock<dlock::Mutex>& hold) -> bool {
          if (take_one(store.segment(i), config.work)) return true;
          hold.unlock();
          empty[static_cast<std::size_t>(i)] = true;
          ++empties;
          return false;
        };
        buyer_loop(slot, deadline, [&](steady::time_point until) -> std::optional<bool> {
          while (empties < config.segments) {
            const int start_at = next_nonempty(static_cast<int>(rng() % static_cast<unsigned>(config.segments)));
            bool sold = false, tried_all = true;
            for (int k = 0; k < config.segments && empties < config.segments; ++k) {
              const int i = (start_at + k) % config.segments;
              if (empty[static_cast<std::size_t>(i)]) continue;
              std::unique_lock hold(segs[static_cast<std::size_t>(i)], std::try_to_lock);
              if (!hold) continue;
              tried_all = false;
              if ((sold = sell_from(i, hold))) break;
            }
            if (sold) return true;
            if (!tried_all || empties >= config.segments) continue;
            const int i = next_nonempty(start_at);
            if (i < 0) break;
            std::unique_lock hold(segs[static_cast<std::size_t>(i)], until);
            if (!hold) return std::nullopt;
            if (sell_from(i, hold)) return true;
          }
          return false;
        });
        break;
      }
      case SaleMode::atomic:
        buyer_loop(slot, deadline, [&](steady::time_point) -> std::optional<bool> {
          if (!store.stock().take_if_positive()) return false;
          simulate_work(config.work);  // the order is processed after the item is reserved
          return true;
        });
        break;
      case SaleMode::pessimistic:
        buyer_loop(slot, deadline, [&](steady::time_point) -> std::optional<bool> {
          return store.stock().take_for_update([&] { simulate_work(config.work); });
        });
        break;
      case SaleMode::optimistic:
        buyer_loop(slot, deadline, [&](steady::time_point) -> std::optional<bool> {
          return store.stock().take_optimistic([&] { simulate_work(config.work); }, slot.retries);
        });
        break;
    }
  });
}

}  // namespace

const char* to_string(SaleMode mode) {
  switch (mode) {
    case SaleMode::none: return "none";
    case SaleMode::local: return "local";
    case SaleMode::dlock: return "dlock";
    case SaleMode::segmented: return "segmented";
    case SaleMode::atomic: return "atomic";
    case SaleMode::pessimistic: return "pessimistic";
    case SaleMode::optimistic: return "optimistic";
  }
  return "?";
}

std::optional<SaleMode> parse_sale_mode(std::string_view name) {
  for (SaleMode m : all_sale_modes)
    if (name == to_string(m)) return m;
  return std::nullopt;
}

SaleResult run_sale(const SaleConfig& config, SaleMode mode) {
  ProcessGroup group(config.processes, config.threads, memory_store_bytes());
  auto store = open_stock_store(config.stock_in, group.user_area(), config.backend, config.product);
  const int segments = mode == SaleMode::segmented ? config.segments : 0;
  store->fill(config.stock, segments);

  group.run([&](int process) { run_buyers(group, config, mode, process); }, config.time_limit);

  SaleResult r;
  r.mode = mode;
  LatencyHistogram latency{};
  for (int p = 0; p < group.processes(); ++p) {
    std::uint64_t mine = 0;
    for (int t = 0; t < group.threads(); ++t) {
      const WorkerSlot& s = group.slot(p, t);
      mine += s.ops;
      r.retries += s.retries;
      latency.merge(s.latency);
      if (static_cast<StopReason>(s.stopped_by) == StopReason::time_limit) r.time_limit_hit = true;
    }
    r.per_process.push_back(mine);
    r.orders += mine;
  }
  r.stock_left = store->left(segments);
  store->clear(segments);
  r.oversold = std::max<std::int64_t>(0, static_cast<std::int64_t>(r.orders) - config.stock);
  r.seconds = std::chrono::duration<double>(group.end_time() - group.start_time()).count();
  r.orders_per_s = r.seconds > 0 ? static_cast<double>(r.orders) / r.seconds : 0;
  r.p50 = latency.percentile(0.50);
  r.p99 = latency.percentile(0.99);
  r.max = latency.percentile(1.0);
  return r;
}

std::string fresh_product_name(std::string_view sku) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  return "flash-" + std::to_string(::getpid()) + "-" + std::to_string(ms) + ":" + std::string(sku);
}

std::chrono::nanoseconds work_arg(const std::string& text, std::string_view option) {
  for (std::string_view unit : {"us", "µs"}) {
    if (text.size() > unit.size() && std::string_view(text).ends_with(unit)) {
      std::string number = text.substr(0, text.size() - unit.size());
      char* end = nullptr;
      double us = std::strtod(number.c_str(), &end);
      if (end != number.c_str() + number.size() || !std::isfinite(us) || us < 0 || us > 1e9)
        throw CLI::ValidationError(std::string(option) + ": '" + text + "' is not a duration");
      return std::chrono::nanoseconds(static_cast<std::int64_t>(std::llround(us * 1e3)));
    }
  }
  return duration_arg(text, option);
}

std::string to_json(const SaleResult& r, std::int64_t stock) {
  std::vector<std::string> shares;
  for (auto n : r.per_process) shares.push_back(std::to_string(n));
  return JsonObject()
      .str("mode", to_string(r.mode))
      .uinteger("orders", r.orders)
      .integer("oversold", r.oversold)
      .num("orders_per_s", r.orders_per_s)
      .num("p50_us", to_us(r.p50))
      .num("p99_us", to_us(r.p99))
      .num("max_us", to_us(r.max))
      .integer("stock_left", r.stock_left)
      .num("seconds", r.seconds, 3)
      .boolean("exact", r.exact(stock))
      .boolean("time_limit_hit", r.time_limit_hit)
      .raw("orders_by_process", json_array(shares))
      .num("jain", jain_index(r.per_process), 3)
      .uinteger("retries", r.retries)
      .text();
}

std::string sale_json(const SaleConfig& config, const std::vector<SaleResult>& results, std::string_view workload) {
  std::vector<std::string> items;
  for (const auto& r : results) items.push_back(to_json(r, config.stock));
  JsonObject json;
  if (!workload.empty()) json.str("workload", workload);
  return json.str("backend", printable_url(config.backend))
      .str("stock_in", config.stock_in)
      .integer("processes", config.processes)
      .integer("threads", config.threads)
      .integer("stock", config.stock)
      .num("work_us", static_cast<double>(config.work.count()) / 1e3)
      .integer("segments", config.segments)
      .boolean("fair", config.lock_options.fair)
      .integer("max_barging_wait_ms", config.lock_options.fair ? 0 : config.lock_options.max_barging_wait.count())
      .raw("modes", json_array(items))
      .text();
}

}  // namespace dlock::cli
