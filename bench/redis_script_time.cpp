// dlock_bench_redis_script_time URL [N] [--json] — how much server time each
// dlock operation's Lua scripts cost on Redis, next to an empty script.
//
// For each operation (one thread, uncontended, N times) it resets the
// server's statistics (CONFIG RESETSTAT), runs the operation, and reads
// cmdstat_evalsha from INFO commandstats: calls and microseconds per call,
// measured by the server itself. Renewals are measured by holding 1,000
// locks (then 1,000 permits) with a short lease and letting the lease keeper
// renew them. The reference is EVALSHA of `return 1`: what any script costs
// just to run. Figures are comparable within one run only.
#include <dlock/dlock.h>

#include <hiredis.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

struct Stat {
  long long calls = 0;
  double usec_per_call = 0;
};

// A second connection, for the statistics (not dlock's own).
class Admin {
 public:
  explicit Admin(const std::string& url) {
    std::smatch m;
    static const std::regex form(R"(redis://(?:[^@/]*@)?([^:/]+)(?::(\d+))?.*)");
    if (!std::regex_match(url, m, form)) throw std::runtime_error("not a redis://host:port URL: " + url);
    context_ = redisConnect(m[1].str().c_str(), m[2].matched ? std::stoi(m[2].str()) : 6379);
    if (!context_ || context_->err) throw std::runtime_error("cannot connect to " + url);
  }
  ~Admin() { redisFree(context_); }
  std::string command(const char* format, const std::string& arg = "") {
    auto* r = static_cast<redisReply*>(arg.empty() ? redisCommand(context_, format)
                                                   : redisCommand(context_, format, arg.c_str()));
    if (!r) throw std::runtime_error("the server went away");
    std::string out = r->str ? std::string(r->str, r->len) : std::to_string(r->integer);
    freeReplyObject(r);
    return out;
  }
  Stat evalsha() {
    const std::string info = command("INFO commandstats");
    std::smatch m;
    static const std::regex line(R"(cmdstat_evalsha:calls=(\d+),usec=\d+,usec_per_call=([0-9.]+))");
    Stat s;
    if (std::regex_search(info, m, line)) {
      s.calls = std::stoll(m[1].str());
      s.usec_per_call = std::stod(m[2].str());
    }
    return s;
  }

 private:
  redisContext* context_ = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s redis://HOST:PORT [N (default 2000)] [--json]\n", argv[0]);
    return 64;
  }
  const std::string url = argv[1];
  int n = 2000;
  bool json = false;
  for (int i = 2; i < argc; ++i) {
    if (std::string(argv[i]) == "--json") json = true;
    else n = std::stoi(argv[i]);
  }
  try {
    Admin admin(url);
    auto client = dlock::connect(url + "/0?prefix=script-time:");
    struct Phase {
      std::string name;
      std::function<void()> run;
    };
    auto mutex = client->mutex("m");
    auto rw = client->shared_mutex("rw");
    auto semaphore = client->semaphore("sem", 4);
    auto election = client->election("leader");
    auto counter = client->counter("c", dlock::CounterWidth::int64);
    auto latch = client->latch("latch", 2'000'000'000);
    auto barrier = client->barrier("barrier", 1);
    const std::string empty_sha = admin.command("SCRIPT LOAD %s", "return 1");
    std::vector<Phase> phases = {
        {"empty script (return 1)", [&] { for (int i = 0; i < n; ++i) admin.command("EVALSHA %s 0", empty_sha); }},
        {"mutex lock + unlock", [&] { for (int i = 0; i < n; ++i) { mutex.lock(); mutex.unlock(); } }},
        {"write lock + unlock", [&] { for (int i = 0; i < n; ++i) { rw.lock(); rw.unlock(); } }},
        {"read lock + unlock", [&] { for (int i = 0; i < n; ++i) { rw.lock_shared(); rw.unlock_shared(); } }},
        {"permit acquire + release", [&] { for (int i = 0; i < n; ++i) { semaphore.acquire(); semaphore.release(); } }},
        {"campaign + resign", [&] { for (int i = 0; i < n; ++i) { election.campaign("me"); election.resign(); } }},
        {"counter fetch_add", [&] { for (int i = 0; i < n; ++i) (void)counter.fetch_add(1); }},
        {"counter compare_exchange", [&] {
           std::int64_t seen = counter.load();
           for (int i = 0; i < n; ++i) (void)counter.compare_exchange(seen, seen + 1), ++seen;
         }},
        {"latch count_down", [&] { for (int i = 0; i < n; ++i) latch.count_down(); }},
        {"barrier arrive + leave (1 party)", [&] { for (int i = 0; i < n; ++i) { barrier.arrive_and_wait(); barrier.leave(); } }},
    };
    std::vector<std::pair<std::string, Stat>> results;
    for (auto& phase : phases) {
      admin.command("CONFIG RESETSTAT");
      phase.run();
      results.emplace_back(phase.name, admin.evalsha());
    }
    // Renewals: 1,000 holds, lease 600 ms (renewed every 200 ms), for 2 s.
    {
      std::vector<dlock::Mutex> held;
      for (int i = 0; i < 1000; ++i) {
        held.push_back(client->mutex("held:" + std::to_string(i), {.lease = 600ms}));
        held.back().lock();
      }
      admin.command("CONFIG RESETSTAT");
      std::this_thread::sleep_for(2s);
      results.emplace_back("renewal of a held lock", admin.evalsha());
      for (auto& m : held) m.unlock();
    }
    {
      auto permits = client->semaphore("held-permits", 1000, {.lease = 600ms});
      for (int i = 0; i < 1000; ++i) permits.acquire();
      admin.command("CONFIG RESETSTAT");
      std::this_thread::sleep_for(2s);
      results.emplace_back("renewal of a held permit", admin.evalsha());
      permits.release(1000);
    }
    if (json) {
      std::printf("{\"workload\": \"redis-script-time\", \"backend\": \"%s\", \"n\": %d, \"operations\": [", url.c_str(), n);
      for (std::size_t i = 0; i < results.size(); ++i)
        std::printf("%s{\"operation\": \"%s\", \"evalsha_calls\": %lld, \"server_us_per_call\": %.2f}",
                    i ? ", " : "", results[i].first.c_str(), results[i].second.calls, results[i].second.usec_per_call);
      std::printf("]}\n");
    } else {
      std::printf("server time per EVALSHA (INFO commandstats), %d operations each, %s\n", n, url.c_str());
      std::printf("  %-34s %10s %12s\n", "operation", "calls", "us/call");
      for (const auto& [name, s] : results)
        std::printf("  %-34s %10lld %12.2f\n", name.c_str(), s.calls, s.usec_per_call);
    }
    admin.command("EVAL %s 0", "for _, k in ipairs(redis.call('KEYS', 'script-time:*')) do redis.call('DEL', k) end");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_bench_redis_script_time: %s\n", e.what());
    return 70;
  }
}
