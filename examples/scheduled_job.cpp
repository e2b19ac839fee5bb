// A scheduled job that runs once across a fleet: every instance's scheduler
// fires it at the same minute (clocks a little apart), one runs it.
//
//   - skip if held: try_lock() once; whoever finds it taken skips this run;
//   - hold at least: keep the lock until `hold_at_least` after taking it, so
//     an instance whose clock is late still finds it taken after a short job;
//   - stop on lost(): the job checks the stop token and the fencing token
//     goes with every write, so a holder that lost its lease stops writing.
//
// Usage: example_scheduled_job [URL] [JOB-NAME] [HOLD-AT-LEAST-SECONDS (default 30)]
#include <dlock/dlock.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stop_token>
#include <thread>

using namespace std::chrono_literals;

// The job itself: a few steps, each a write the store can refuse by token.
bool nightly_report(std::uint64_t token, std::stop_token stop) {
  for (int step = 0; step < 3; ++step) {
    if (stop.stop_requested()) return false;  // the lock was lost: someone else may be running it now
    std::printf("  step %d (fencing token %llu)\n", step, static_cast<unsigned long long>(token));
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

int main(int argc, char** argv) {
  const char* url = argc > 1 ? argv[1] : "file:///tmp/dlock-example";
  const char* job = argc > 2 ? argv[2] : "jobs/nightly-report";
  // Longer than the clock skew between instances.
  const auto hold_at_least = std::chrono::seconds(argc > 3 ? std::atoi(argv[3]) : 30);

  auto client = dlock::connect(url);
  auto lock = client->mutex(job, {.lease = 60s});  // watchdog-renewed while held
  if (!lock.try_lock()) {
    std::printf("%s: another instance has it; skipping this run\n", job);
    return 0;
  }
  const auto taken_at = std::chrono::steady_clock::now();
  std::printf("%s: running\n", job);
  const bool done = nightly_report(lock.token(), lock.stop_token());
  if (!done || lock.lost()) {
    std::printf("%s: lost the lock while running; stopped\n", job);
    lock.unlock();
    return 1;
  }
  std::this_thread::sleep_until(taken_at + hold_at_least);  // hold at least: late instances skip
  lock.unlock();
  std::printf("%s: done\n", job);
  return 0;
}
