// dlock bench — measured workloads, each with its reference measured in the same run.
//
//   uncontended  one client, one thread, lock + unlock of one key
//   contended    P processes × T threads on one key; inside, a non-atomic
//                read-modify-write of a shared-memory counter (lost updates
//                = expected − final, must be 0)
//   flash-sale   the demo's dlock and segmented modes
//   many-keys    T threads of one process, each locking its own key
//   async        one thread starts --in-flight async_lock()s on as many
//                keys at once, waits for them all, releases them all
//
// Figures are meant as ratios, because the machines are noisy: next to
// lock+unlock/s each lock workload reports `raw`, Client::ping() in a loop
// with the same parallelism and the same number of store round trips (two
// per lock+unlock), and the ratio lock+unlock/s ÷ (ping/s ÷ 2): 1.0 would
// mean a lock costs exactly its two round trips. Every workload stops after
// --seconds or --max-ops operations per thread.
#include "commands.h"
#include "flash_sale.h"
#include "stock_store.h"
#include "latency.h"
#include "process_group.h"

#include <dlock/dlock.h>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <random>

namespace dlock::cli {
namespace {

struct BenchArgs {
  std::string backend;
  std::string url;  // store_url's
  std::string workload;
  int processes = 0;  // 0: the workload's default
  int threads = 0;    // 0: the workload's default
  std::string seconds = "3s";
  std::uint64_t max_ops = 1'000'000;
  std::int64_t stock = 5000;
  std::string work;   // empty: the workload's default
  int segments = 8;
  std::string stock_in;  // empty: default_stock_store(backend)
  std::string counter_in = "memory";
  bool fair = false;
  bool json = false;
  std::string primitive = "mutex";
  int read_percent = -1;  // -1: the primitive's default (shared: 90; others: 0)
  int permits = 4;
  int rounds = 5;
  std::string lease = "1s";
  std::string max_barging_wait;  // empty: MutexOptions' default
  int in_flight = 1000;
};

// What a person at a terminal sees while the bench runs: first how long the
// whole run may take, then a line as each phase starts, so a run of
// several times --seconds is not silent until the end. Nothing without a
// terminal on stderr, nothing with --json; on stderr, so what stdout gets
// is the same whether or not someone watches.
class Progress {
 public:
  explicit Progress(bool json) : on_(!json && ::isatty(STDERR_FILENO)) {}

  // `phases` phases, the run taking at most `longest` (zero: not known up front).
  void plan(const std::string& workload, int phases, std::chrono::milliseconds longest, const std::string& why) {
    phases_ = phases;
    if (!on_) return;
    std::string line = "dlock bench " + workload + ": " + std::to_string(phases) + (phases == 1 ? " phase" : " phases");
    if (longest.count()) line += ", at most " + seconds_text(longest) + " in all";
    if (!why.empty()) line += " (" + why + ")";
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  void phase(const std::string& what) {
    ++at_;
    if (on_) std::fprintf(stderr, "  [%d/%d] %s\n", at_, phases_, what.c_str());
  }
  static std::string seconds_text(std::chrono::milliseconds d) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g s", static_cast<double>(d.count()) / 1000);
    return buf;
  }

 private:
  bool on_;
  int phases_ = 0;
  int at_ = 0;
};

// What the shared key protects, in memory every process sees.
struct LockStore {
  std::atomic<std::int64_t> counter;         // incremented non-atomically under the key
  std::atomic<std::int32_t> last_pid;        // process that held the key last
  std::atomic<std::uint64_t> owner_changes;  // acquisitions by another process than the last holder
  std::atomic<std::uint64_t> wakeups;        // ClientStats::wakeups, summed over the processes
  std::atomic<std::uint64_t> writes;         // sections that wrote the counter
};

struct LoopConfig {
  std::string backend;
  std::string key;  // the shared key, or the stem of per-thread keys
  bool key_per_thread = false;
  int processes = 1;
  int threads = 1;
  std::chrono::milliseconds seconds{3000};
  std::uint64_t max_ops = 0;
  std::chrono::nanoseconds work{0};
  MutexOptions lock_options;  // --fair, --max-barging-wait (lock_options_of)
  // contended: where the counter lives. "memory": shared memory (the lock's
  // own cost); "redis": a key read with GET and written with SET inside the
  // lock, as a service would (comparable with redis-py doing the same).
  std::string counter_in = "memory";
  // What each thread takes: a Mutex, a SharedMutex (reads shared, writes
  // exclusive) or one permit of a Semaphore (many holders: nothing written).
  std::string primitive = "mutex";
  int read_percent = 0;  // sections that only read the counter (shared: under the read lock)
  int permits = 4;
  Progress* progress = nullptr;  // told as each phase starts (in this process only)
};

// The lock under test, one per thread.
class Section {
 public:
  Section(Client& client, const LoopConfig& config, const std::string& key) {
    const MutexOptions& options = config.lock_options;
    if (config.primitive == "shared") shared_.emplace(client.shared_mutex(key, options));
    else if (config.primitive == "semaphore") semaphore_.emplace(client.semaphore(key, config.permits, options));
    else mutex_.emplace(client.mutex(key, options));
  }
  bool lock_until(steady::time_point end, bool read) {
    if (shared_) return read ? shared_->try_lock_shared_until(end) : shared_->try_lock_until(end);
    if (semaphore_) return semaphore_->try_acquire_until(end);
    return mutex_->try_lock_until(end);
  }
  void unlock(bool read) {
    if (shared_) return read ? shared_->unlock_shared() : shared_->unlock();
    if (semaphore_) return semaphore_->release();
    mutex_->unlock();
  }

 private:
  std::optional<Mutex> mutex_;
  std::optional<SharedMutex> shared_;
  std::optional<Semaphore> semaphore_;
};

struct RawResult {
  std::uint64_t pings = 0;
  double seconds = 0;
  double per_s = 0;
};

struct LoopResult {
  std::uint64_t ops = 0;
  double seconds = 0;
  double ops_per_s = 0;
  LatencyHistogram acquire{};
  LatencyHistogram release{};
  std::int64_t lost_updates = 0;
  std::uint64_t owner_changes = 0;
  std::uint64_t wakeups = 0;  // waits a notification ended (ClientStats::wakeups of every process)
  std::vector<std::uint64_t> shares;  // per process (one key) or per thread (own keys)
  std::string stopped;
  RawResult raw;
};

std::string stop_summary(ProcessGroup& group) {
  int counts[4] = {0, 0, 0, 0};
  for (int p = 0; p < group.processes(); ++p)
    for (int t = 0; t < group.threads(); ++t) ++counts[std::min<std::uint32_t>(group.slot(p, t).stopped_by, 3)];
  std::string out;
  for (int i = 0; i < 4; ++i)
    if (counts[i]) out += (out.empty() ? "" : ",") + std::string(to_string(static_cast<StopReason>(i)));
  return out;
}

// Client::ping() on processes × threads, `per_thread` pings each or until `seconds`.
RawResult measure_raw(const LoopConfig& config, std::uint64_t per_thread) {
  ProcessGroup group(config.processes, config.threads, 1);
  group.run(
      [&](int process) {
        auto client = dlock::connect(config.backend);
        const auto end = group.wait_for_start() + config.seconds;
        run_threads(group.threads(), [&](int thread) {
          WorkerSlot& slot = group.slot(process, thread);
          while (slot.ops < per_thread) {
            const auto t0 = steady::now();
            if (t0 >= end) break;
            client->ping().throw_if_error();
            slot.latency.add(steady::now() - t0);
            ++slot.ops;
          }
          slot.end_ns = steady_ns(steady::now());
        });
      },
      config.seconds);
  RawResult r;
  for (int p = 0; p < group.processes(); ++p)
    for (int t = 0; t < group.threads(); ++t) r.pings += group.slot(p, t).ops;
  r.seconds = std::chrono::duration<double>(group.end_time() - group.start_time()).count();
  r.per_s = r.seconds > 0 ? static_cast<double>(r.pings) / r.seconds : 0;
  return r;
}

LoopResult run_lock_loop(const LoopConfig& config) {
  ProcessGroup group(config.processes, config.threads, sizeof(LockStore));
  auto& store = group.user<LockStore>();
  std::unique_ptr<StockStore> counter_store;  // the counter in Redis (--counter-in redis)
  if (config.counter_in == "redis") {
    counter_store = open_stock_store("redis", nullptr, config.backend, config.key + ":counter");
    counter_store->fill(0, 0);
  }
  group.run(
      [&](int process) {
        auto client = dlock::connect(config.backend);
        const std::int32_t me = ::getpid();
        const auto end = group.wait_for_start() + config.seconds;
        run_threads(group.threads(), [&](int thread) {
          WorkerSlot& slot = group.slot(process, thread);
          Section section(*client, config,
                          config.key_per_thread
                              ? config.key + ":key:" + std::to_string(process * group.threads() + thread)
                              : config.key);
          std::minstd_rand pick(static_cast<std::uint32_t>(me) * 131u + static_cast<std::uint32_t>(thread));
          std::uniform_int_distribution<int> percent(0, 99);
          auto counter_view = counter_store ? counter_store->view() : nullptr;
          StopReason why = StopReason::time_up;
          for (;;) {
            if (slot.ops >= config.max_ops) {
              why = StopReason::max_ops;
              break;
            }
            // A semaphore's holders overlap by design: they only read.
            const bool read = config.primitive == "semaphore" || percent(pick) < config.read_percent;
            const auto t0 = steady::now();
            if (t0 >= end || !section.lock_until(end, read)) break;
            const auto t1 = steady::now();
            if (config.key_per_thread) {
              ++slot.private_counter;
            } else {
              // Read, (work), write: correct only if the lock excludes.
              const std::int64_t seen =
                  counter_view ? counter_view->stock().read() : store.counter.load(std::memory_order_relaxed);
              const std::int32_t last = store.last_pid.load(std::memory_order_relaxed);
              if (last != me) {
                if (last != 0) store.owner_changes.fetch_add(1, std::memory_order_relaxed);
                store.last_pid.store(me, std::memory_order_relaxed);
              }
              if (config.work.count() > 0) std::this_thread::sleep_for(config.work);
              if (!read) {
                if (counter_view) counter_view->stock().write(seen + 1);
                else store.counter.store(seen + 1, std::memory_order_relaxed);
                store.writes.fetch_add(1, std::memory_order_relaxed);
              }
            }
            const auto t2 = steady::now();
            section.unlock(read);
            const auto t3 = steady::now();
            slot.latency.add(t1 - t0);
            slot.release.add(t3 - t2);
            ++slot.ops;
          }
          slot.stopped_by = static_cast<std::uint32_t>(why);
          slot.end_ns = steady_ns(steady::now());
          if (client->stats().failed_releases != 0)
            throw std::runtime_error("unlock failed " + std::to_string(client->stats().failed_releases) + " times");
        });
        store.wakeups.fetch_add(client->stats().wakeups, std::memory_order_relaxed);
      },
      config.seconds);

  LoopResult r;
  std::uint64_t private_total = 0;
  for (int p = 0; p < group.processes(); ++p) {
    std::uint64_t mine = 0;
    for (int t = 0; t < group.threads(); ++t) {
      const WorkerSlot& s = group.slot(p, t);
      mine += s.ops;
      private_total += s.private_counter;
      r.acquire.merge(s.latency);
      r.release.merge(s.release);
      if (config.key_per_thread) r.shares.push_back(s.ops);
    }
    if (!config.key_per_thread) r.shares.push_back(mine);
    r.ops += mine;
  }
  const std::uint64_t counted = config.key_per_thread ? private_total
                                : counter_store       ? static_cast<std::uint64_t>(counter_store->left(0))
                                                      : static_cast<std::uint64_t>(store.counter.load());
  if (counter_store) counter_store->clear(0);
  const std::uint64_t wrote = config.key_per_thread ? r.ops : store.writes.load();
  r.lost_updates = static_cast<std::int64_t>(wrote) - static_cast<std::int64_t>(counted);
  r.owner_changes = store.owner_changes.load();
  r.wakeups = store.wakeups.load();
  r.seconds = std::chrono::duration<double>(group.end_time() - group.start_time()).count();
  r.ops_per_s = r.seconds > 0 ? static_cast<double>(r.ops) / r.seconds : 0;
  r.stopped = stop_summary(group);

  // The reference: as many round trips as the locks made (two each), same parallelism.
  const auto workers = static_cast<std::uint64_t>(config.processes * config.threads);
  if (config.progress)
    config.progress->phase("raw round trips, the reference: Client::ping() as many times as the locks took, up to " +
                           Progress::seconds_text(config.seconds));
  if (r.ops > 0) r.raw = measure_raw(config, (2 * r.ops + workers - 1) / workers);
  return r;
}

double ratio_vs_raw(const LoopResult& r) { return r.raw.per_s > 0 ? r.ops_per_s / (r.raw.per_s / 2) : 0; }

// Wake-ups per real handoff (the lock went to another process); 0 if none.
double wakeups_per_handoff(const LoopResult& r) {
  return r.owner_changes > 0 ? static_cast<double>(r.wakeups) / static_cast<double>(r.owner_changes) : 0;
}

void print_loop(const std::string& workload, const LoopConfig& c, const LoopResult& r, bool json) {
  if (json) {
    std::vector<std::string> shares;
    for (auto s : r.shares) shares.push_back(std::to_string(s));
    std::cout << JsonObject()
                     .str("workload", workload)
                     .str("backend", printable_url(c.backend))
                     .integer("processes", c.processes)
                     .integer("threads", c.threads)
                     .boolean("fair", c.lock_options.fair)
                     .str("primitive", c.primitive)
                     .integer("read_percent", c.read_percent)
                     .integer("permits", c.primitive == "semaphore" ? c.permits : 0)
                     .integer("max_barging_wait_ms",
                              c.lock_options.fair ? 0 : c.lock_options.max_barging_wait.count())
                     .str("counter_in", c.key_per_thread ? "" : c.counter_in)
                     .num("seconds", r.seconds, 3)
                     .uinteger("ops", r.ops)
                     .num("ops_per_s", r.ops_per_s)
                     .num("acquire_p50_us", to_us(r.acquire.percentile(0.5)))
                     .num("acquire_p99_us", to_us(r.acquire.percentile(0.99)))
                     .num("release_p50_us", to_us(r.release.percentile(0.5)))
                     .num("release_p99_us", to_us(r.release.percentile(0.99)))
                     .integer("lost_updates", r.lost_updates)
                     .uinteger("owner_changes", r.owner_changes)
                     .num("owner_changes_per_s", r.seconds > 0 ? static_cast<double>(r.owner_changes) / r.seconds : 0)
                     .uinteger("wakeups", r.wakeups)
                     .num("wakeups_per_handoff", wakeups_per_handoff(r), 3)
                     .raw("shares", json_array(shares))
                     .num("jain", jain_index(r.shares), 3)
                     .str("stopped", r.stopped)
                     .raw("raw", JsonObject()
                                     .str("what", "Client::ping() loop, same processes x threads")
                                     .uinteger("pings", r.raw.pings)
                                     .num("seconds", r.raw.seconds, 3)
                                     .num("ping_per_s", r.raw.per_s)
                                     .text())
                     .num("ratio_vs_raw", ratio_vs_raw(r), 3)
                     .text()
              << "\n";
    return;
  }
  std::printf("dlock bench %s — %s, %d process%s × %d thread%s, %.2f s (stopped: %s)\n", workload.c_str(),
              c.backend.c_str(), c.processes, c.processes == 1 ? "" : "es", c.threads, c.threads == 1 ? "" : "s",
              r.seconds, r.stopped.c_str());
  if (c.primitive != "mutex" || c.read_percent > 0)
    std::printf("  primitive           %s%s, %d%% of sections only read\n", c.primitive.c_str(),
                c.primitive == "semaphore" ? (" (" + std::to_string(c.permits) + " permits)").c_str() : "",
                c.primitive == "semaphore" ? 100 : c.read_percent);
  std::printf("  lock+unlock/s       %.0f  (%llu in all)\n", r.ops_per_s, static_cast<unsigned long long>(r.ops));
  std::printf("  acquire p50 / p99   %.1f us / %.1f us   (time in lock())\n", to_us(r.acquire.percentile(0.5)),
              to_us(r.acquire.percentile(0.99)));
  std::printf("  release p50 / p99   %.1f us / %.1f us   (time in unlock())\n", to_us(r.release.percentile(0.5)),
              to_us(r.release.percentile(0.99)));
  std::printf("  lost updates        %lld%s\n", static_cast<long long>(r.lost_updates),
              r.lost_updates == 0 ? "" : "   <-- MUTUAL EXCLUSION FAILED");
  if (!c.key_per_thread && c.processes > 1)
    std::printf("  owner changes/s     %.0f  (handoffs to another process; %llu in all)\n",
                r.seconds > 0 ? static_cast<double>(r.owner_changes) / r.seconds : 0,
                static_cast<unsigned long long>(r.owner_changes));
  if (!c.key_per_thread && c.processes > 1)
    std::printf("  wake-ups/handoff    %.3f  (%llu waits ended by a notification; 1.0 = one waiter woken per handoff)\n",
                wakeups_per_handoff(r), static_cast<unsigned long long>(r.wakeups));
  if (r.shares.size() > 1) {
    std::printf("  shares              ");
    for (auto s : r.shares) std::printf("%.1f%% ", r.ops ? 100.0 * static_cast<double>(s) / static_cast<double>(r.ops) : 0);
    std::printf("  Jain %.3f\n", jain_index(r.shares));
  }
  std::printf("  raw ping/s          %.0f  (%llu pings in %.2f s, same %d×%d)\n", r.raw.per_s,
              static_cast<unsigned long long>(r.raw.pings), r.raw.seconds, c.processes, c.threads);
  std::printf("  ratio               %.2f  = lock+unlock/s ÷ (ping/s ÷ 2); 1.0 = a lock costs its two round trips\n",
              ratio_vs_raw(r));
}

// The locks' options from --fair and --max-barging-wait; a bad bound throws (duration_arg).
MutexOptions lock_options_of(const BenchArgs& args) {
  MutexOptions options{.fair = args.fair};
  if (!args.max_barging_wait.empty()) options.max_barging_wait = duration_arg(args.max_barging_wait, "--max-barging-wait");
  return options;
}

int flash_sale_bench(const BenchArgs& args, const std::string& backend, std::chrono::milliseconds seconds) {
  SaleConfig config;
  config.backend = backend;
  config.processes = args.processes ? args.processes : 4;
  config.threads = args.threads ? args.threads : 2;
  config.stock = args.stock;
  config.work = work_arg(args.work.empty() ? "100us" : args.work, "--work");
  config.segments = args.segments;
  config.time_limit = seconds;
  config.product = fresh_product_name("sku-bench");
  config.stock_in = args.stock_in.empty() ? default_stock_store(backend) : args.stock_in;
  config.lock_options = lock_options_of(args);
  Progress progress(args.json);
  progress.plan("flash-sale", 2, 2 * seconds, "each mode sells until sold out or --seconds");
  std::vector<SaleResult> results;
  for (SaleMode m : {SaleMode::dlock, SaleMode::segmented}) {
    progress.phase(std::string("selling with mode ") + to_string(m) + ", up to " + Progress::seconds_text(seconds));
    results.push_back(run_sale(config, m));
  }
  bool broken = false;
  for (const auto& r : results)
    if (r.oversold > 0 || (!r.time_limit_hit && !r.exact(config.stock))) broken = true;
  if (args.json) {
    std::cout << sale_json(config, results, "flash-sale") << "\n";
    return broken ? 1 : 0;
  }
  std::printf("dlock bench flash-sale — %s, %d processes × %d threads, %lld items, %s work per order\n",
              backend.c_str(), config.processes, config.threads, static_cast<long long>(config.stock),
              args.work.empty() ? "100us" : args.work.c_str());
  std::printf("  %-10s %8s %9s %10s %9s %9s %7s %s\n", "mode", "orders", "oversold", "orders/s", "p50 ms", "p99 ms",
              "Jain", "stopped");
  for (const auto& r : results)
    std::printf("  %-10s %8llu %9lld %10.0f %9.3f %9.3f %7.3f %s\n", to_string(r.mode),
                static_cast<unsigned long long>(r.orders), static_cast<long long>(r.oversold), r.orders_per_s,
                to_us(r.p50) / 1e3, to_us(r.p99) / 1e3, jain_index(r.per_process),
                r.time_limit_hit ? "time (sold part of the stock)" : "sold out");
  if (results.size() == 2 && results[0].orders_per_s > 0)
    std::printf("  segmented / dlock orders/s: %.2f×\n", results[1].orders_per_s / results[0].orders_per_s);
  return broken ? 1 : 0;
}

// Election failover: a leader in a child process, a candidate queued in
// this one; the leader is SIGKILLed and the time until the candidate leads
// is measured, `rounds` times. Every round's leader is forked before this
// process opens any client: a client library with threads of its own (gRPC
// for etcd://) is not safe to use in a child forked after they started, so
// each child waits, single-threaded, until its round tells it to campaign.
int failover_bench(const BenchArgs& args, const std::string& backend, std::chrono::milliseconds seconds) {
  const auto lease = duration_arg(args.lease, "--lease");
  const auto key = "bench-" + std::to_string(::getpid()) + ":failover";
  struct Leader {
    pid_t pid = -1;
    int go = -1;     // a byte: campaign now
    int ready = -1;  // a byte back: leading
  };
  std::vector<Leader> leaders;
  struct Reaper {  // whatever happens, no leader outlives the bench
    std::vector<Leader>& leaders;
    ~Reaper() {
      for (auto& l : leaders) {
        if (l.pid > 0) {
          ::kill(l.pid, SIGKILL);
          (void)::waitpid(l.pid, nullptr, 0);
        }
        ::close(l.go);
        ::close(l.ready);
      }
    }
  } reaper{leaders};
  for (int round = 0; round < args.rounds; ++round) {
    int go[2], ready[2];
    if (::pipe(go) != 0) throw std::runtime_error("failover: pipe failed");
    if (::pipe(ready) != 0) {
      ::close(go[0]);
      ::close(go[1]);
      throw std::runtime_error("failover: pipe failed");
    }
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("failover: fork failed");
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the bench gone (any way): so is this leader
      ::close(go[1]);
      ::close(ready[0]);
      char byte = 0;
      if (::read(go[0], &byte, 1) != 1) ::_exit(0);
      try {
        auto client = dlock::connect(backend);
        auto election = client->election(key + ":" + std::to_string(round), {.lease = lease});
        election.campaign("leader");
        (void)!::write(ready[1], "x", 1);
        std::this_thread::sleep_for(std::chrono::seconds(60));  // until killed (bounded)
      } catch (...) {
      }
      ::_exit(0);
    }
    ::close(go[0]);
    ::close(ready[1]);
    leaders.push_back({pid, go[1], ready[0]});
  }
  std::vector<double> took_ms;
  const auto give_up = steady::now() + seconds * args.rounds + std::chrono::seconds(30);
  Progress progress(args.json);
  progress.plan("failover", args.rounds, std::chrono::duration_cast<std::chrono::milliseconds>(give_up - steady::now()),
                "a round ends when the killed leader's successor leads: about --lease, " +
                    Progress::seconds_text(lease) + ", on a leased store");
  for (int round = 0; round < args.rounds && steady::now() < give_up; ++round) {
    progress.phase("round " + std::to_string(round + 1) + ": the leader killed, its successor waiting");
    const std::string name = key + ":" + std::to_string(round);
    Leader& leader = leaders[static_cast<std::size_t>(round)];
    char byte = 0;
    const bool led = ::write(leader.go, "x", 1) == 1 && ::read(leader.ready, &byte, 1) == 1;
    if (!led) throw std::runtime_error("failover: the leader process did not lead");
    auto client = dlock::connect(backend);
    auto candidate = client->election(name, {.lease = lease});
    std::atomic<std::int64_t> won_ns{0};
    std::thread campaign([&] {
      if (candidate.campaign_for(std::chrono::seconds(30) + lease, "successor")) won_ns = steady_ns(steady::now());
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the candidate is in line
    const auto killed = steady_ns(steady::now());
    ::kill(leader.pid, SIGKILL);
    (void)::waitpid(leader.pid, nullptr, 0);
    leader.pid = -1;
    campaign.join();
    if (won_ns == 0) throw std::runtime_error("failover: the candidate never took over");
    took_ms.push_back(static_cast<double>(won_ns - killed) / 1e6);
    candidate.resign();
  }
  std::vector<double> sorted = took_ms;
  std::sort(sorted.begin(), sorted.end());
  const double p50 = sorted.empty() ? 0 : sorted[sorted.size() / 2], worst = sorted.empty() ? 0 : sorted.back();
  if (args.json) {
    std::vector<std::string> each;
    for (double t : took_ms) each.push_back(std::to_string(t));
    std::cout << JsonObject()
                     .str("workload", "failover")
                     .str("backend", printable_url(backend))
                     .integer("rounds", static_cast<std::int64_t>(took_ms.size()))
                     .integer("lease_ms", lease.count())
                     .num("failover_ms_p50", p50, 3)
                     .num("failover_ms_max", worst, 3)
                     .raw("failover_ms", json_array(each))
                     .text()
              << "\n";
    return 0;
  }
  std::printf("dlock bench failover — %s, %zu rounds, lease %lld ms\n", printable_url(backend).c_str(), took_ms.size(),
              static_cast<long long>(lease.count()));
  std::printf("  leader SIGKILLed → successor leads: p50 %.1f ms, max %.1f ms\n", p50, worst);
  return 0;
}

// The async API at scale: one thread starts `in_flight` async_lock()s on as
// many keys at once (callbacks: no thread per acquisition), waits until all
// are held, then releases them all (Hold::unlock(): not waited for on
// redis://, then applied before the next round starts); rounds until
// --seconds. Reported: acquisitions/s over the acquire phases (start of the
// first call to the last completion), and lock+unlock/s over the whole run.
int async_bench(const BenchArgs& args, const std::string& backend, std::chrono::milliseconds seconds) {
  Progress progress(args.json);
  progress.plan("async", 1, seconds, "");
  progress.phase("async_lock() rounds for " + Progress::seconds_text(seconds));
  auto client = dlock::connect(backend);
  const int n = args.in_flight;
  const std::string stem = "bench-" + std::to_string(::getpid()) + ":async:";
  std::vector<Mutex> mutexes;
  mutexes.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) mutexes.push_back(client->mutex(stem + std::to_string(i)));
  std::vector<Hold> holds(static_cast<std::size_t>(n));
  std::mutex mu;
  std::condition_variable all_held;
  int left = 0, failed = 0;
  std::string error;
  LatencyHistogram rounds{};
  std::uint64_t acquired = 0;
  std::chrono::nanoseconds acquiring{0};
  const auto start = steady::now(), end = start + seconds;
  do {
    left = n;
    const auto asked = steady::now();
    for (int i = 0; i < n; ++i)
      mutexes[static_cast<std::size_t>(i)].async_lock([&, i](Status s, Hold hold) {
        std::lock_guard lk(mu);
        if (!s.ok() && failed++ == 0) error = s.message();
        holds[static_cast<std::size_t>(i)] = std::move(hold);
        if (--left == 0) all_held.notify_one();
      });
    {
      std::unique_lock lk(mu);
      all_held.wait(lk, [&] { return left == 0; });
    }
    const auto took = steady::now() - asked;
    if (failed > 0) throw std::runtime_error("async: " + std::to_string(failed) + " acquisitions failed: " + error);
    rounds.add(took);
    acquiring += took;
    acquired += static_cast<std::uint64_t>(n);
    for (auto& h : holds) h.unlock();
    // The releases are applied before the next round is timed: this
    // thread's next call runs after them on their connection (redis://;
    // other stores release before unlock() returns).
    (void)client->ping();
  } while (steady::now() < end && acquired < args.max_ops);
  const double total_s = std::chrono::duration<double>(steady::now() - start).count();
  const double acquire_s = std::chrono::duration<double>(acquiring).count();
  const double per_s = acquire_s > 0 ? static_cast<double>(acquired) / acquire_s : 0;
  const double cycle_per_s = total_s > 0 ? static_cast<double>(acquired) / total_s : 0;
  if (args.json) {
    std::cout << JsonObject()
                     .str("workload", "async")
                     .str("backend", backend)
                     .integer("in_flight", n)
                     .uinteger("rounds", rounds.count())
                     .uinteger("ops", acquired)
                     .num("seconds", total_s, 3)
                     .num("acquired_per_s", per_s)
                     .num("ops_per_s", cycle_per_s)
                     .num("round_p50_ms", to_us(rounds.percentile(0.5)) / 1e3, 3)
                     .num("round_p99_ms", to_us(rounds.percentile(0.99)) / 1e3, 3)
                     .text()
              << "\n";
    return 0;
  }
  std::printf("dlock bench async — %s, %d async_lock() in flight from one thread, %llu rounds in %.2f s\n",
              backend.c_str(), n, static_cast<unsigned long long>(rounds.count()), total_s);
  std::printf("  acquired/s          %.0f  (%llu; start of the first call to the last completion, per round)\n",
              per_s, static_cast<unsigned long long>(acquired));
  std::printf("  lock+unlock/s       %.0f  (the whole run: releases included)\n", cycle_per_s);
  std::printf("  round p50 / p99     %.2f ms / %.2f ms  (all %d held)\n", to_us(rounds.percentile(0.5)) / 1e3,
              to_us(rounds.percentile(0.99)) / 1e3, n);
  return 0;
}

// The arguments checked before anything starts (no I/O): CLI::ValidationError
// naming the bad one. Returns --seconds.
std::chrono::milliseconds check_bench(const BenchArgs& args) {
  // A flag named --seconds takes a plain number of seconds ("5", "0.5");
  // a duration with a unit ("500ms") is accepted too.
  const bool plain = !args.seconds.empty() && args.seconds.find_first_not_of("0123456789.") == std::string::npos;
  const auto seconds = duration_arg(plain ? args.seconds + "s" : args.seconds, "--seconds");
  if (seconds.count() <= 0) throw CLI::ValidationError("--seconds: must be > 0");
  if (!args.work.empty()) (void)work_arg(args.work, "--work");
  (void)lock_options_of(args);  // a bad --max-barging-wait throws here
  if (args.workload == "failover") (void)duration_arg(args.lease, "--lease");
  if (args.workload == "uncontended" && ((args.processes && args.processes != 1) || (args.threads && args.threads != 1)))
    throw CLI::ValidationError("--workload uncontended: is one process and one thread by definition");
  if (args.workload == "contended" && args.counter_in == "redis" &&
      default_stock_store(args.url) != "redis")
    throw CLI::ValidationError("--counter-in redis: needs a redis:// backend (the counter lives in its server)");
  return seconds;
}

// (`args` passed check_bench.)
int bench(const BenchArgs& args, std::chrono::milliseconds seconds) {
  const std::string& backend = args.url;
  if (args.workload == "flash-sale") return flash_sale_bench(args, backend, seconds);
  if (args.workload == "failover") return failover_bench(args, backend, seconds);
  if (args.workload == "async") return async_bench(args, backend, seconds);

  LoopConfig c;
  c.backend = backend;
  c.seconds = seconds;
  c.max_ops = args.max_ops;
  c.work = work_arg(args.work.empty() ? "0" : args.work, "--work");
  c.lock_options = lock_options_of(args);
  c.primitive = args.primitive;
  c.read_percent = args.read_percent >= 0 ? args.read_percent : (args.primitive == "shared" ? 90 : 0);
  c.permits = args.permits;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  c.key = "bench-" + std::to_string(::getpid()) + "-" + std::to_string(ms) + ":" + args.workload;
  if (args.workload == "contended") {
    c.processes = args.processes ? args.processes : 4;
    c.threads = args.threads ? args.threads : 1;
    c.counter_in = args.counter_in;
  } else if (args.workload == "many-keys") {
    c.key_per_thread = true;
    c.processes = args.processes ? args.processes : 1;
    c.threads = args.threads ? args.threads : 4;
  }
  Progress progress(args.json);
  c.progress = &progress;
  progress.plan(args.workload, 2, 2 * seconds, "the locks for --seconds, then the raw round trips to compare");
  progress.phase("lock+unlock with " + std::to_string(c.processes) + (c.processes == 1 ? " process × " : " processes × ") +
                 std::to_string(c.threads) + (c.threads == 1 ? " thread" : " threads") + ", up to " +
                 Progress::seconds_text(seconds));
  LoopResult r = run_lock_loop(c);
  print_loop(args.workload, c, r, args.json);
  return r.lost_updates == 0 ? 0 : 1;
}

}  // namespace

void add_bench(CLI::App& app, Chosen& chosen) {
  auto args = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "Measure lock throughput and latency against the store's raw round trips");
  auto* backend =
      cmd->add_option("--backend", args->backend, "Store URL (default: $DLOCK_BACKEND or a per-user file:// dir)")
          ->type_name("URL");
  cmd->add_option("--workload,-w", args->workload,
                  "uncontended | contended | flash-sale | many-keys | failover | async")
      ->required()
      ->check(CLI::IsMember({"uncontended", "contended", "flash-sale", "many-keys", "failover", "async"}));
  cmd->add_option("--primitive", args->primitive,
                  "What the lock workloads take: mutex (default), shared (SharedMutex: reads shared) or "
                  "semaphore (one of --permits)")
      ->check(CLI::IsMember({"mutex", "shared", "semaphore"}));
  cmd->add_option("--read-percent", args->read_percent,
                  "Sections that only read (shared: 90, under the read lock; mutex: 0, under the lock)")
      ->check(CLI::Range(0, 100));
  cmd->add_option("--permits", args->permits, "semaphore: permits (default 4)")->check(CLI::Range(1, 1'000'000));
  cmd->add_option("--in-flight", args->in_flight, "async: async_lock() calls in flight at once, one key each (default 1000)")
      ->check(CLI::Range(1, 1'000'000));
  cmd->add_option("--rounds", args->rounds, "failover: leaders killed (default 5)")->check(CLI::Range(1, 100));
  cmd->add_option("--lease", args->lease, "failover: the leader's lease where the store leases it (default 1s)");
  cmd->add_option("--processes,-p", args->processes, "Processes (contended, flash-sale: 4; others: 1)")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--threads,-t", args->threads, "Threads per process (many-keys: 4; flash-sale: 2; others: 1)")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--seconds,-s", args->seconds, "How long each measurement runs, in seconds (default 3; 500ms-style durations too)");
  cmd->add_option("--max-ops", args->max_ops, "Stop a thread after this many operations (default 1000000)")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1'000'000'000}));
  cmd->add_option("--stock", args->stock, "flash-sale: items (default 5000)")->check(CLI::Range(1, 100'000'000));
  cmd->add_option("--work", args->work, "Work inside the critical section (flash-sale: 100us; others: 0)");
  cmd->add_option("--segments", args->segments, "flash-sale: segments (default 8)")->check(CLI::Range(1, max_segments));
  cmd->add_option("--stock-in", args->stock_in,
                  "flash-sale: where the stock lives: memory or redis (default: redis for redis:// backends)")
      ->check(CLI::IsMember(stock_store_kinds()));
  cmd->add_option("--counter-in", args->counter_in,
                  "contended: where the counter lives: memory (default) or redis (GET + SET inside the lock)")
      ->check(CLI::IsMember({"memory", "redis"}));
  cmd->add_option("--max-barging-wait", args->max_barging_wait,
                  "MutexOptions::max_barging_wait: how long a waiter lets others barge before it is served "
                  "first (default 1ms; 0 = in order)");
  cmd->add_flag("--fair", args->fair, "Lock with MutexOptions::fair (FIFO waiters; backends with a queue only)");
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->footer("Exit status: 0; 1 if mutual exclusion failed (lost updates or oversold); 70 if a worker failed.");
  cmd->callback([args, backend, &chosen] {
    args->url = store_url(args->backend, backend->count() > 0);
    const auto seconds = check_bench(*args);
    chosen = [args, seconds] { return bench(*args, seconds); };
  });
}

}  // namespace dlock::cli
