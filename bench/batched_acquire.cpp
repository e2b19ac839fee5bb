// dlock_bench_batched_acquire URL [N (default 60)] [ROUNDS (default 200)] —
// what N acquisitions started together cost: each round starts N
// async_try_lock_for(0) on N free names (the client's async thread sends
// the attempts that are due as one batch of scripts; on redis+cluster it is
// split over the masters serving the names), waits for all N Holds, then
// drops them. Prints the mean time of a round.
#include <dlock/dlock.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s URL [N (default 60)] [ROUNDS (default 200)]\n", argv[0]);
    return 64;
  }
  const int n = argc > 2 ? std::stoi(argv[2]) : 60;
  const int rounds = argc > 3 ? std::stoi(argv[3]) : 200;
  const std::string stem = "batch-" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  auto client = dlock::connect(argv[1]);
  std::vector<dlock::Mutex> locks;
  for (int i = 0; i < n; ++i) locks.push_back(client->mutex(stem + ":" + std::to_string(i)));
  auto round = [&] {
    std::vector<std::future<dlock::Hold>> started;
    for (auto& m : locks) started.push_back(m.async_try_lock_for(std::chrono::milliseconds(0)));
    std::vector<dlock::Hold> holds;
    for (auto& f : started) holds.push_back(f.get());
    for (auto& h : holds)
      if (!h) return false;
    return true;
  };
  if (!round()) return 1;  // warm up connections
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < rounds; ++i)
    if (!round()) return 1;
  const auto us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  std::printf("{\"backend\":\"%s\",\"acquisitions\":%d,\"us_per_round\":%.0f}\n", client->scheme().c_str(), n,
              us / rounds);
  return 0;
}
