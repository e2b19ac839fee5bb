// flash_sale.h — the write-ups' flash sale, shared by `dlock demo` and
// `dlock bench --workload flash-sale`.
//
// P worker processes × T threads ("buyers") sell `stock` items of one
// product. The stock lives in a store every process sees (shared memory, or
// the Redis server of a redis:// backend, or a PostgreSQL table:
// stock_store.h); selling one
// item is read → simulated work (a sleep, like the database call in the
// write-ups) → write, so without mutual exclusion two buyers read the same
// value and one sale is lost: the shop sells more than it has. Every buyer
// stops when it sees stock 0, or at the hard time limit (then the result is
// marked incomplete).
#pragma once

#include <dlock/options.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::cli {

enum class SaleMode {
  none,       // no lock at all
  local,      // one std::mutex per process (protects its own threads only)
  dlock,      // one dlock::Mutex for the product, held per purchase
  segmented,  // the stock split into segments, one dlock::Mutex each
  atomic,     // one conditional decrement (CAS loop) in the store, no lock
  pessimistic,  // SQL stores: SELECT … FOR UPDATE, work, UPDATE, in one transaction
  optimistic,   // SQL stores: read stock and version, work, UPDATE … WHERE version = read, retried
};

const char* to_string(SaleMode mode);
std::optional<SaleMode> parse_sale_mode(std::string_view name);
inline constexpr SaleMode all_sale_modes[] = {SaleMode::none,   SaleMode::local,       SaleMode::dlock,
                                              SaleMode::segmented, SaleMode::atomic, SaleMode::pessimistic,
                                              SaleMode::optimistic};
// Whether a mode needs a store with transactions (a database).
inline bool needs_transactions(SaleMode mode) {
  return mode == SaleMode::pessimistic || mode == SaleMode::optimistic;
}

struct SaleConfig {
  std::string backend;                          // store URL for dlock and segmented
  int processes = 4;
  int threads = 2;                              // buyers per process; local needs >= 2 to mean anything
  std::int64_t stock = 5000;
  std::chrono::nanoseconds work{100'000};       // simulated work between read and write; 0: none
  int segments = 8;                             // segmented mode; at most max_segments
  std::chrono::milliseconds time_limit{60'000}; // hard limit per mode
  std::string product;                          // lock-name stem, fresh per run (see fresh_product_name)
  std::string stock_in = "memory";              // where the stock lives: stock_store.h
  dlock::MutexOptions lock_options;             // dlock and segmented: the locks' options
};

inline constexpr int max_segments = 256;

struct SaleResult {
  SaleMode mode{};
  std::uint64_t orders = 0;       // purchases buyers believe they made
  std::int64_t stock_left = 0;    // what the store says at the end
  std::int64_t oversold = 0;      // orders − stock, if positive
  double seconds = 0;             // from the common start to the last buyer's end
  double orders_per_s = 0;
  std::chrono::nanoseconds p50{}; // per order (lock wait + work + write + unlock)
  std::chrono::nanoseconds p99{};
  std::chrono::nanoseconds max{};  // the slowest order (within the histogram's ~3%)
  bool time_limit_hit = false;
  std::vector<std::uint64_t> per_process;  // orders by process
  std::uint64_t retries = 0;               // optimistic: sales redone after losing a race
  // Sold exactly the stock, no more, no less, and finished.
  bool exact(std::int64_t stock) const {
    return !time_limit_hit && oversold == 0 && stock_left == 0 && orders == static_cast<std::uint64_t>(stock);
  }
};

// Forks config.processes workers (the caller must have no threads or dlock
// clients yet, see process_group.h), runs one mode, returns what happened.
// Throws std::runtime_error if a worker process failed or crashed.
SaleResult run_sale(const SaleConfig& config, SaleMode mode);

// A product name no earlier run used: "flash-<pid>-<ms since epoch>:<sku>".
std::string fresh_product_name(std::string_view sku);

// Parses "100us", "250ms", "0", "1s"; microseconds as well as duration_arg's units.
std::chrono::nanoseconds work_arg(const std::string& text, std::string_view option);

// {"mode":...,"orders":...,"oversold":...,"orders_per_s":...,"p50_us":...,"p99_us":..., ...}
std::string to_json(const SaleResult& r, std::int64_t stock);
// The whole sale as one JSON object: the configuration and every mode's
// result; `workload` (if not empty) is added first, for dlock bench.
std::string sale_json(const SaleConfig& config, const std::vector<SaleResult>& results, std::string_view workload);

}  // namespace dlock::cli
