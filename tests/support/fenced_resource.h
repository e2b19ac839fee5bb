// fenced_resource.h — the oracle: a resource shared by test processes that
// checks fencing tokens and counts every violation of mutual exclusion.
//
// It lives in a file mapped MAP_SHARED by every process, and is protected by
// its own process-shared robust mutex — independent of the lock under test.
//   - enter(token, holder): a write by `holder` claiming grant `token`.
//     Rejected (and counted) if token < the highest seen ("stale holder"),
//     or equal to it but from another holder ("token issued twice").
//     Counted as an overlap if another holder is inside.
//   - a plain counter updated read → pause → write, so overlaps also show
//     up as lost updates.
// Token 0 means "unfenced" (the no-lock control run): no token checks, only
// overlap and lost-update counting.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace dlock::test {

struct ResourceCounts {
  std::uint64_t accepted = 0;
  std::uint64_t stale_rejected = 0;     // token lower than the highest seen
  std::uint64_t duplicate_tokens = 0;   // same token from two holders
  std::uint64_t overlaps = 0;           // two holders inside at once
  std::int64_t counter = 0;             // the read-modify-write counter
  std::uint64_t occupied = 0;           // occupy() calls
  std::int64_t max_occupancy = 0;       // the most holders inside at once (occupy/vacate)
  std::int64_t max_wait_us = 0;         // the longest wait for the lock (waited())
};

class FencedResource {
 public:
  // Creates (create=true) or opens the shared state at `path`.
  FencedResource(const std::string& path, bool create);
  ~FencedResource();
  FencedResource(const FencedResource&) = delete;
  FencedResource& operator=(const FencedResource&) = delete;

  // true if the write was accepted.
  bool enter(std::uint64_t token, std::int64_t holder);
  void leave(std::int64_t holder);
  // One fenced write: enter + leave.
  bool write(std::uint64_t token, std::int64_t holder);
  // write(), and its place in the order of every write_ordered() call
  // (accepted or not), counted from 1: a history's order of writes.
  struct Ordered {
    bool accepted;
    std::uint64_t seq;
  };
  Ordered write_ordered(std::uint64_t token, std::int64_t holder);
  // For sections N holders may share (a Semaphore's permits): one holder
  // in, one out; counts() reports the most that were ever in at once.
  void occupy();
  void vacate();
  // A holder waited this long for the lock; counts() reports the longest.
  void waited(std::chrono::steady_clock::duration wait);

  std::int64_t read_counter() const;
  void write_counter(std::int64_t value);

  ResourceCounts counts() const;

 private:
  struct State;
  State* state_ = nullptr;
};

}  // namespace dlock::test
