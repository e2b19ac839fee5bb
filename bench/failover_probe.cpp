// dlock_bench_failover_probe URL SECONDS — one client locking and unlocking
// one name as fast as it can for SECONDS, printing one JSON line per outage:
// the time between the last successful acquisition before it and the first
// after it, for every gap longer than 100 ms. bench/redis_sentinel.sh runs it
// while it fails the master over.
//
//   {"gap_ms": 1234, "at_ms": 5012, "errors": 17}
//   {"summary": true, "acquisitions": 9123, "longest_gap_ms": 1234}
#include <dlock/dlock.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

int main(int argc, char** argv) {
  if (argc != 3 || std::atoi(argv[2]) <= 0) {
    std::fprintf(stderr, "usage: %s URL SECONDS\n", argv[0]);
    return 64;
  }
  using namespace std::chrono;
  using steady = steady_clock;
  auto client = dlock::connect(argv[1], {.op_timeout = 500ms});
  auto m = client->mutex("failover-probe", {.lease = 2s});
  const auto start = steady::now(), until = start + seconds(std::atoi(argv[2]));
  auto last = start;
  long long acquisitions = 0, errors = 0;
  milliseconds longest{0};
  while (steady::now() < until) {
    try {
      if (!m.try_lock_for(200ms)) continue;
      m.unlock();
    } catch (const dlock::Error&) {
      ++errors;
      std::this_thread::sleep_for(10ms);
      continue;
    }
    const auto now = steady::now();
    const auto gap = duration_cast<milliseconds>(now - last);
    if (gap > 100ms) {
      std::printf("{\"gap_ms\": %lld, \"at_ms\": %lld, \"errors\": %lld}\n", static_cast<long long>(gap.count()),
                  static_cast<long long>(duration_cast<milliseconds>(last - start).count()), errors);
      std::fflush(stdout);
      errors = 0;
    }
    longest = std::max(longest, gap);
    last = now;
    ++acquisitions;
  }
  std::printf("{\"summary\": true, \"acquisitions\": %lld, \"longest_gap_ms\": %lld}\n", acquisitions,
              static_cast<long long>(longest.count()));
  return 0;
}
