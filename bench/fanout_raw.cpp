// dlock_bench_fanout_raw HOST:PORT[,HOST:PORT...] [N] — what one round of
// requests to N redis-servers costs on this machine at best, next to one
// request to one of them: the floor for a quorum's round.
//
// One thread, hiredis, no dlock: "one" is PING to the first server and its
// answer; "fan-out" writes PING to every server first, then reads every
// answer (the servers work in parallel, the client switches no thread).
// Prints the p50 of each in microseconds and their ratio, one JSON line.
// Figures are comparable within one run only.
#include <hiredis.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace {

using steady = std::chrono::steady_clock;

struct Free {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Context = std::unique_ptr<redisContext, Free>;

double p50_us(std::vector<double> samples) {
  std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(samples.size() / 2), samples.end());
  return samples[samples.size() / 2];
}

bool ping_all(std::vector<Context>& nodes) {
  for (auto& c : nodes) {
    if (redisAppendCommand(c.get(), "PING") != REDIS_OK) return false;
    int done = 0;
    while (!done)
      if (redisBufferWrite(c.get(), &done) != REDIS_OK) return false;
  }
  for (auto& c : nodes) {
    void* reply = nullptr;
    if (redisGetReply(c.get(), &reply) != REDIS_OK || !reply) return false;
    freeReplyObject(reply);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s HOST:PORT[,HOST:PORT...] [N]\n", argv[0]);
    return 64;
  }
  const int rounds = argc > 2 ? std::max(100, std::atoi(argv[2])) : 20000;
  std::vector<Context> nodes;
  std::string list = argv[1];
  for (std::size_t at = 0; at <= list.size();) {
    const auto comma = std::min(list.find(',', at), list.size());
    const std::string hostport = list.substr(at, comma - at);
    at = comma + 1;
    const auto colon = hostport.rfind(':');
    if (colon == std::string::npos) {
      std::fprintf(stderr, "not HOST:PORT: %s\n", hostport.c_str());
      return 64;
    }
    Context c(redisConnect(hostport.substr(0, colon).c_str(), std::atoi(hostport.c_str() + colon + 1)));
    if (!c || c->err) {
      std::fprintf(stderr, "cannot connect to %s\n", hostport.c_str());
      return 1;
    }
    nodes.push_back(std::move(c));
  }
  std::vector<Context> first;
  first.push_back(std::move(nodes.front()));
  nodes.erase(nodes.begin());
  nodes.insert(nodes.begin(), nullptr);
  std::vector<double> one, all;
  for (int i = 0; i < rounds; ++i) {
    auto t0 = steady::now();
    if (!ping_all(first)) return 1;
    auto t1 = steady::now();
    std::swap(nodes.front(), first.front());
    if (!ping_all(nodes)) return 1;
    auto t2 = steady::now();
    std::swap(nodes.front(), first.front());
    one.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    all.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
  }
  const double a = p50_us(one), b = p50_us(all);
  std::printf("{\"workload\":\"fanout_raw\",\"nodes\":%zu,\"rounds\":%d,\"one_p50_us\":%.1f,\"fanout_p50_us\":%.1f,"
              "\"ratio\":%.2f}\n",
              nodes.size(), rounds, a, b, b / a);
  return 0;
}
