// dlock_bench_held_locks URL [N] — what holding many locks costs a client:
// resident memory per held lock, renewal round trips per period, and CPU
// (user + system, all threads) per lock+unlock.
#include <dlock/dlock.h>

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

long rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string key;
  long value = 0;
  while (status >> key)
    if (key == "VmRSS:" && status >> value) return value;
  return 0;
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s URL [N (default 10000)]\n", argv[0]);
    return 64;
  }
  const int n = argc > 2 ? std::stoi(argv[2]) : 10'000;
  const std::string stem = "held-" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  auto client = dlock::connect(argv[1]);
  std::vector<dlock::Mutex> locks;
  locks.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    locks.push_back(client->mutex(stem + ":" + std::to_string(i), {.lease = std::chrono::seconds(3)}));
  locks[0].lock();  // warm up connections and caches
  locks[0].unlock();

  const long before = rss_kib();
  for (auto& m : locks) m.lock();
  const long after = rss_kib();
  const auto stats_before = client->stats();
  std::this_thread::sleep_for(std::chrono::milliseconds(3500));  // ~3 renewal periods (every 1 s)
  const auto stats_after = client->stats();
  for (auto& m : locks) m.unlock();

  auto one = client->mutex(stem + ":cpu");
  constexpr int rounds = 5000;
  const double cpu_before = cpu_seconds();
  for (int i = 0; i < rounds; ++i) {
    one.lock();
    one.unlock();
  }
  const double cpu_after = cpu_seconds();

  std::printf("{\"backend\":\"%s\",\"held\":%d,\"rss_bytes_per_held_lock\":%.0f,"
              "\"renewals_in_3_5s\":%llu,\"renewal_batches_in_3_5s\":%llu,\"cpu_us_per_lock_unlock\":%.1f}\n",
              client->scheme().c_str(), n, static_cast<double>(after - before) * 1024.0 / n,
              static_cast<unsigned long long>(stats_after.renewals - stats_before.renewals),
              static_cast<unsigned long long>(stats_after.renewal_batches - stats_before.renewal_batches),
              (cpu_after - cpu_before) / rounds * 1e6);
  return 0;
}
