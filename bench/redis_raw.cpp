// dlock_bench_redis_raw [--seconds S] [--max-ops N] [--in-flight K] HOST:PORT — what one
// connection to a redis-server can do with K requests in flight, with no client logic: the
// raw limit for `dlock bench --workload async` (K async_lock()s from one thread).
//
// One thread, hiredis, rounds of K requests written back to back, then their K replies read:
//   ping     PING: the server's cheapest command, pipelined;
//   scripts  dlock's own mutex scripts (backends/redis/scripts.h), as the async bench sends
//            them: K acquires of K free names (EVALSHA of the acquire script, the keys and
//            arguments dlock passes), then the K releases with the tokens they returned.
//            What a fenced acquire costs the server at best.
// Each for S seconds (or N requests). Prints one JSON line: ping/s; acquired/s over the
// acquire halves of the rounds (how the async bench counts) and lock+unlock/s over the
// whole phase. Figures are comparable within one run only.
#include "backends/redis/scripts.h"
#include "raw_limit.h"

#include <hiredis.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using dlock_bench::clock_type;

struct Free {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Context = std::unique_ptr<redisContext, Free>;
struct FreeReply {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, FreeReply>;

Reply command(redisContext* c, const std::vector<std::string>& words) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const auto& w : words) {
    argv.push_back(w.data());
    lens.push_back(w.size());
  }
  auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
  if (!r) throw std::runtime_error(std::string("redis: ") + c->errstr);
  if (r->type == REDIS_REPLY_ERROR) {
    const std::string e(r->str, r->len);
    freeReplyObject(r);
    throw std::runtime_error("redis: " + e);
  }
  return Reply(r);
}

// Writes every request of `round`, then reads as many replies; `check(i, reply)` sees each.
template <class Check>
void pipeline(redisContext* c, const std::vector<std::vector<std::string>>& round, Check check) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const auto& words : round) {
    argv.clear();
    lens.clear();
    for (const auto& w : words) {
      argv.push_back(w.data());
      lens.push_back(w.size());
    }
    if (redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()) != REDIS_OK)
      throw std::runtime_error(std::string("redis: ") + c->errstr);
  }
  for (std::size_t i = 0; i < round.size(); ++i) {
    void* r = nullptr;
    if (redisGetReply(c, &r) != REDIS_OK || !r) throw std::runtime_error(std::string("redis: ") + c->errstr);
    Reply reply(static_cast<redisReply*>(r));
    if (reply->type == REDIS_REPLY_ERROR) throw std::runtime_error("redis: " + std::string(reply->str, reply->len));
    check(i, *reply);
  }
}

double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

}  // namespace

int main(int argc, char** argv) {
  dlock_bench::RawArgs args;
  long in_flight = 1000;
  const std::string bad = dlock_bench::parse_raw_args(argc, argv, args, [&](const std::string& name, const char* v) {
    if (name != "--in-flight") return false;
    in_flight = std::stol(v);
    return true;
  });
  const auto colon = args.target.rfind(':');
  if (!bad.empty() || colon == std::string::npos || in_flight < 1 || in_flight > 100'000) {
    std::fprintf(stderr, "%s%susage: %s [--seconds S] [--max-ops N] [--in-flight K (1..100000)] HOST:PORT\n",
                 bad.c_str(), bad.empty() ? "" : "\n", argv[0]);
    return 64;
  }
  try {
    Context c(redisConnect(args.target.substr(0, colon).c_str(), std::stoi(args.target.substr(colon + 1))));
    if (!c || c->err) throw std::runtime_error("cannot connect to " + args.target);
    const auto k = static_cast<std::size_t>(in_flight);

    // PING, K in flight.
    const std::vector<std::vector<std::string>> pings(k, {"PING"});
    long pinged = 0;
    const auto ping_start = clock_type::now();
    const auto ping_phase = dlock_bench::timed_loop(args.seconds, std::max(1L, args.max_ops / in_flight), [&] {
      pipeline(c.get(), pings, [&](std::size_t, const redisReply&) { ++pinged; });
    });
    const double ping_per_s = pinged / seconds_since(ping_start);
    (void)ping_phase;

    // dlock's acquire and release scripts, K names in flight.
    using dlock::detail::redis::Script;
    using dlock::detail::redis::script_text;
    const std::string acquire = command(c.get(), {"SCRIPT", "LOAD", script_text(Script::acquire)})->str;
    const std::string release = command(c.get(), {"SCRIPT", "LOAD", script_text(Script::release)})->str;
    const std::string owner = "raw-" + std::to_string(::getpid()) + "/1";
    std::vector<std::vector<std::string>> acquires, releases(k);
    for (std::size_t i = 0; i < k; ++i) {
      const std::string base = "dlock-raw-" + std::to_string(::getpid()) + ":{" + std::to_string(i) + "}:";
      acquires.push_back({"EVALSHA", acquire, "4", base + "lock", base + "queue", base + "waiters", base + "since",
                          owner, "30000", "", "2000", "5", "0"});
      // 60 s of token retention (dlock's default: 1 h): the same cost, and the keys go sooner.
      releases[i] = {"EVALSHA", release, "4", base + "lock", base + "queue", base + "waiters", base + "since",
                     owner, "", "60000", "dlock-raw:client:", std::to_string(i), "2000"};
    }
    long acquired = 0;
    double acquiring = 0;
    const auto script_start = clock_type::now();
    (void)dlock_bench::timed_loop(args.seconds, std::max(1L, args.max_ops / in_flight), [&] {
      const auto asked = clock_type::now();
      pipeline(c.get(), acquires, [&](std::size_t i, const redisReply& r) {
        if (r.type != REDIS_REPLY_ARRAY || r.elements != 2 || r.element[0]->integer != 1)
          throw std::runtime_error("an acquire of a free name did not grant it");
        const redisReply& token = *r.element[1];
        releases[i][8] = token.type == REDIS_REPLY_INTEGER ? std::to_string(token.integer)
                                                           : std::string(token.str, token.len);
      });
      acquiring += seconds_since(asked);
      acquired += in_flight;
      pipeline(c.get(), releases, [&](std::size_t, const redisReply& r) {
        if (r.type != REDIS_REPLY_INTEGER || r.integer != 1) throw std::runtime_error("a release was not applied");
      });
    });
    const double script_s = seconds_since(script_start);
    std::printf("{\"workload\":\"redis_raw\",\"in_flight\":%ld,\"ping_per_s\":%.0f,\"script_acquired_per_s\":%.0f,"
                "\"script_lock_unlock_per_s\":%.0f}\n",
                in_flight, ping_per_s, acquiring > 0 ? acquired / acquiring : 0.0, acquired / script_s);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_bench_redis_raw: %s\n", e.what());
    return 1;
  }
}
