// process_group.h — worker processes that share one memory region.
//
// The demo and the benchmarks need several *processes* (a std::mutex must
// visibly fail to protect anything across them), a store every one of them
// sees, and results that come back even from a process that dies. A
// ProcessGroup maps a file from a fresh temporary directory MAP_SHARED (the
// file and directory are removed right after mapping, so nothing is left
// behind even on Ctrl-C; the mapping lives on in every forked child), lays
// out one WorkerSlot per worker thread plus a caller-defined area, forks
// the processes and waits for them.
//
// Fork safety: run() forks, so the calling process must not have started
// any thread or dlock client before (a child would inherit a copy of a
// client whose threads don't exist). Each child connects by itself.
#pragma once

#include "latency.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>

namespace dlock::cli {

using steady = std::chrono::steady_clock;

// What one worker thread reports. Written only by its own thread, read by
// the parent after the child exited.
struct WorkerSlot {
  std::uint64_t ops;             // completed operations (orders, lock+unlock, pings)
  std::uint64_t private_counter; // a counter only this thread's key protects (many-keys)
  std::uint64_t retries;         // optimistic sales redone after losing a race
  std::int64_t end_ns;           // steady_clock time the loop ended
  std::uint32_t stopped_by;      // a StopReason
  LatencyHistogram latency;      // per operation, or time spent in lock()
  LatencyHistogram release;      // time spent in unlock(), where measured
};
static_assert(std::is_trivially_copyable_v<WorkerSlot>);

enum class StopReason : std::uint32_t {
  done = 0,        // sold out / nothing left to do
  time_up = 1,     // the planned duration passed (benchmarks)
  max_ops = 2,     // the operation cap was reached
  time_limit = 3,  // the hard time limit passed: the run is incomplete
};
const char* to_string(StopReason r);

class ProcessGroup {
 public:
  // `user_bytes` of zeroed shared memory for the caller (the stock, ...).
  ProcessGroup(int processes, int threads_per_process, std::size_t user_bytes);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int processes() const noexcept { return processes_; }
  int threads() const noexcept { return threads_; }

  template <class T>
  T& user() noexcept {
    static_assert(std::is_trivially_copyable_v<T> || std::is_standard_layout_v<T>);
    return *static_cast<T*>(user_);
  }
  void* user_area() noexcept { return user_; }
  WorkerSlot& slot(int process, int thread) noexcept;

  // Forks the processes; child i runs body(i) and exits (0, or 1 with the
  // exception's message recorded). body must call wait_for_start() once,
  // after its set-up (connecting) and before it measures anything. Returns
  // when every child has exited. Throws std::runtime_error naming the
  // process if one failed, crashed or was still running `limit` after the
  // start (it is then killed).
  void run(const std::function<void(int process)>& body, std::chrono::milliseconds limit);

  // In a child: marks it ready and blocks until every child is; returns the
  // common start time. Throws if the parent called the run off.
  steady::time_point wait_for_start();

  // In the parent, after run(): when the workers were let go, and the
  // latest end_ns over all slots.
  steady::time_point start_time() const noexcept;
  steady::time_point end_time() noexcept;

 private:
  struct Control;
  struct ProcessRecord;

  int processes_;
  int threads_;
  std::size_t bytes_ = 0;
  void* base_ = nullptr;
  Control* control_ = nullptr;
  ProcessRecord* records_ = nullptr;
  WorkerSlot* slots_ = nullptr;
  void* user_ = nullptr;
};

// Runs fn(i) on n threads and joins them; rethrows the first exception.
void run_threads(int n, const std::function<void(int thread)>& fn);

// The steady clock as nanoseconds since its epoch (CLOCK_MONOTONIC, the
// same in every process of the machine).
inline std::int64_t steady_ns(steady::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace dlock::cli
