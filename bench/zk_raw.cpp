// dlock_bench_zk_raw — what ZooKeeper itself allows, for the lock figures to be read against:
// the znode operations a lock needs, issued with the C client and no lock logic at all.
//
//   dlock_bench_zk_raw [--seconds S] [--max-ops N] [--in-flight K] CONNECT
//
// CONNECT is host:port[,host:port...] or zk://host:port[,...] (a chroot or query is ignored).
// Three measurements, each on one session, under a fresh parent znode deleted at the end:
//   sync-pairs     create(EPHEMERAL_SEQUENTIAL) + delete, synchronous: one lock + unlock
//                  at best (2 writes, each a round trip and a disk sync on the server)
//   async-pairs    the same pairs with K (default 64) in flight through the async API: what
//                  many independent locks on one session could reach
//   sync-triples   create + getChildren(parent) + delete, synchronous: what an uncontended
//                  Curator InterProcessMutex costs (it lists the children to find its place)
// Each prints one JSON line: {"raw_limit": NAME, "ops": units done, "ops_per_s", "requests_per_op",
// "in_flight", "p50_us"/"p99_us" (per unit; sync only), ...}. Each stops after S seconds (default 3)
// or N units (default 1,000,000); an async run still waiting 15 s after its limit fails.
//
// Exit status: 0; 70 if the session or an operation failed; 64 on bad usage.
#include "raw_limit.h"

#include <zookeeper/zookeeper.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using dlock_bench::clock_type;
using dlock_bench::percentile_us;

struct Config : dlock_bench::RawArgs {  // target: the CONNECT string
  int in_flight = 64;
};

// The session, connected once; the C client's own threads do the I/O and the completions.
class Session {
 public:
  explicit Session(const std::string& connect) {
    zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);
    zh_ = zookeeper_init(connect.c_str(), &Session::on_event, 10000, nullptr, this, 0);
    if (!zh_) throw std::runtime_error("zookeeper_init failed for " + connect);
    std::unique_lock lk(mu_);
    if (!cv_.wait_for(lk, std::chrono::seconds(15), [&] { return connected_; })) {
      zookeeper_close(zh_);
      throw std::runtime_error("no session with " + connect + " within 15 s");
    }
  }
  ~Session() { zookeeper_close(zh_); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  zhandle_t* get() const { return zh_; }

 private:
  static void on_event(zhandle_t*, int type, int state, const char*, void* ctx) {
    auto* self = static_cast<Session*>(ctx);
    if (type == ZOO_SESSION_EVENT && state == ZOO_CONNECTED_STATE) {
      std::lock_guard lk(self->mu_);
      self->connected_ = true;
      self->cv_.notify_all();
    }
  }
  zhandle_t* zh_ = nullptr;
  std::mutex mu_;
  std::condition_variable cv_;
  bool connected_ = false;
};

void check(int rc, const char* what) {
  if (rc != ZOK) throw std::runtime_error(std::string(what) + ": " + zerror(rc));
}

void report(const Config& cfg, const char* name, const char* unit, int requests, int in_flight, long ops,
            double seconds, std::vector<double>* latencies) {
  std::printf("{\"raw_limit\": \"%s\", \"tool\": \"dlock_bench_zk_raw (ZooKeeper C client %s)\", "
              "\"unit\": \"%s\", \"requests_per_op\": %d, \"in_flight\": %d, \"ops\": %ld, \"seconds\": %.3f, "
              "\"ops_per_s\": %.1f, \"requests_per_s\": %.1f",
              name, ZOO_VERSION, unit, requests, in_flight, ops, seconds,
              seconds > 0 ? static_cast<double>(ops) / seconds : 0.0,
              seconds > 0 ? static_cast<double>(ops) * requests / seconds : 0.0);
  if (latencies) {
    std::printf(", \"p50_us\": %.1f, \"p99_us\": %.1f", percentile_us(*latencies, 0.5),
                percentile_us(*latencies, 0.99));
  }
  std::printf(", \"server\": \"%s\"}\n", cfg.target.c_str());
  std::fflush(stdout);
}

// create (+ getChildren) + delete in a loop on one session.
void run_sync(const Config& cfg, zhandle_t* zh, const std::string& parent, bool list_children) {
  const std::string prefix = parent + "/n-";
  char created[512];
  auto r = dlock_bench::timed_loop(cfg.seconds, cfg.max_ops, [&] {
    check(zoo_create(zh, prefix.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, created,
                     sizeof created),
          "create");
    if (list_children) {
      String_vector children{};
      check(zoo_get_children(zh, parent.c_str(), 0, &children), "getChildren");
      deallocate_String_vector(&children);
    }
    check(zoo_delete(zh, created, -1), "delete");
  });
  if (list_children) {
    report(cfg, "sync-triples", "create+getChildren+delete", 3, 1, r.ops, r.seconds, &r.latencies);
  } else {
    report(cfg, "sync-pairs", "create+delete", 2, 1, r.ops, r.seconds, &r.latencies);
  }
}

// K chains, each: acreate → (completion) adelete → (completion) acreate … until the deadline.
class AsyncPairs {
 public:
  AsyncPairs(const Config& cfg, zhandle_t* zh, const std::string& parent)
      : cfg_(cfg), zh_(zh), prefix_(parent + "/n-") {}

  void run() {
    start_ = clock_type::now();
    deadline_ = start_ + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(cfg_.seconds));
    for (int i = 0; i < cfg_.in_flight; ++i) issue_create();
    std::unique_lock lk(mu_);
    const auto give_up = deadline_ + std::chrono::seconds(15);
    if (!cv_.wait_until(lk, give_up, [&] { return running_ == 0; })) {
      // Completions may still arrive for this object: leave without unwinding.
      std::fprintf(stderr, "dlock_bench_zk_raw: async pairs: %d chains still waiting 15 s past the limit\n", running_);
      std::_Exit(70);
    }
    if (!error_.empty()) throw std::runtime_error(error_);
    const double elapsed = std::chrono::duration<double>(end_ - start_).count();
    report(cfg_, "async-pairs", "create+delete", 2, cfg_.in_flight, done_.load(), elapsed, nullptr);
  }

 private:
  void issue_create() {
    {
      std::lock_guard lk(mu_);
      ++running_;
    }
    int rc = zoo_acreate(zh_, prefix_.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL,
                         &AsyncPairs::created, this);
    if (rc != ZOK) chain_ends(std::string("acreate: ") + zerror(rc));
  }

  static void created(int rc, const char* path, const void* data) {
    auto* self = static_cast<AsyncPairs*>(const_cast<void*>(data));
    if (rc != ZOK) return self->chain_ends(std::string("create: ") + zerror(rc));
    rc = zoo_adelete(self->zh_, path, -1, &AsyncPairs::deleted, self);
    if (rc != ZOK) self->chain_ends(std::string("adelete: ") + zerror(rc));
  }

  static void deleted(int rc, const void* data) {
    auto* self = static_cast<AsyncPairs*>(const_cast<void*>(data));
    if (rc != ZOK) return self->chain_ends(std::string("delete: ") + zerror(rc));
    const long n = ++self->done_;
    if (n < self->cfg_.max_ops && clock_type::now() < self->deadline_) {
      // This chain goes on: the next create replaces the one that just finished.
      rc = zoo_acreate(self->zh_, self->prefix_.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL,
                       &AsyncPairs::created, self);
      if (rc == ZOK) return;
      return self->chain_ends(std::string("acreate: ") + zerror(rc));
    }
    self->chain_ends("");
  }

  void chain_ends(const std::string& error) {
    std::lock_guard lk(mu_);
    if (!error.empty() && error_.empty()) error_ = error;
    end_ = clock_type::now();
    if (--running_ == 0) cv_.notify_all();
  }

  const Config& cfg_;
  zhandle_t* zh_;
  std::string prefix_;
  clock_type::time_point start_, deadline_, end_;
  std::atomic<long> done_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  int running_ = 0;
  std::string error_;
};

int usage(const char* msg) {
  std::fprintf(stderr, "dlock_bench_zk_raw: %s\nusage: dlock_bench_zk_raw [--seconds S] [--max-ops N] [--in-flight K] "
                       "CONNECT\n", msg);
  return 64;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  const std::string wrong = dlock_bench::parse_raw_args(argc, argv, cfg, [&](const std::string& name, const char* value) {
    if (name != "--in-flight") return false;
    cfg.in_flight = std::stoi(value);
    return true;
  });
  if (!wrong.empty()) return usage(wrong.c_str());
  if (cfg.target.starts_with("zk://")) cfg.target = cfg.target.substr(5);
  cfg.target = cfg.target.substr(0, cfg.target.find_first_of("/?"));
  if (cfg.target.empty()) return usage("no CONNECT string");
  if (cfg.in_flight < 1 || cfg.in_flight > 4096) return usage("--in-flight must be in [1, 4096]");
  try {
    Session session(cfg.target);
    const std::string parent = "/dlock-bench-raw-" + std::to_string(::getpid());
    int rc = zoo_create(session.get(), parent.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0);
    if (rc != ZOK && rc != ZNODEEXISTS) check(rc, "create parent");
    std::string error;
    try {
      // Warm-up, not reported: the server's JIT compiles its write path in
      // the first second, which would otherwise count against the first
      // measurement only.
      const auto warm_until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      char made[512];
      for (int n = 0; n < 2000 && std::chrono::steady_clock::now() < warm_until; ++n) {
        check(zoo_create(session.get(), (parent + "/warm-").c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE,
                         ZOO_EPHEMERAL_SEQUENTIAL, made, sizeof made),
              "warm-up create");
        check(zoo_delete(session.get(), made, -1), "warm-up delete");
      }
      run_sync(cfg, session.get(), parent, false);
      AsyncPairs(cfg, session.get(), parent).run();
      run_sync(cfg, session.get(), parent, true);
    } catch (const std::exception& e) {
      error = e.what();
    }
    zoo_delete(session.get(), parent.c_str(), -1);  // empty again: every child was deleted
    if (!error.empty()) throw std::runtime_error(error);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_bench_zk_raw: %s\n", e.what());
    return 70;
  }
  return 0;
}
