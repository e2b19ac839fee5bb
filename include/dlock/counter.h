// dlock/counter.h — an integer shared by every process that uses the same
// store, changed atomically (std::atomic's operations, on a server).
//
// Each call is one atomic step on the store: load, store, fetch_add and
// compare_exchange behave as std::atomic<std::int64_t>'s with sequential
// consistency across all clients, including other processes and hosts.
// compare_exchange never fails spuriously (the strong form). A counter that
// was never written reads as 0.
//
// Range: on zk:// the node's data is a big-endian signed integer in one of
// Apache Curator's two encodings, so Java services read and change the
// same value: 4 bytes (SharedCount's int, the default) or 8 bytes
// (DistributedAtomicLong's long). A counter keeps the encoding it was
// created with, whichever handle writes it; the CounterWidth given to
// Client::counter() only chooses how a missing one is created. On a 4-byte
// counter, values that don't fit in an int32 (a store(), a desired value,
// or a fetch_add result) are refused with invalid_argument and nothing is
// changed.
//
// Blocking and errors: each call blocks for at most ClientOptions::op_timeout
// (under heavy contention fetch_add retries its compare-and-set within
// that time), then throws Error: unavailable if the store did not answer or
// the retries ran out — a write that failed with unavailable may or may not
// have been applied; re-read before retrying if that matters.
// invalid_argument: out of range, or the node holds something else than a
// counter.
//
// Backends: zk:// (the node <root>/<name>, persistent, created on first
// write; a Counter and a Mutex of the same name use the same node: give
// them different names); redis:// (a hash {value, width} under the name's
// hash tag, the server's own 64-bit arithmetic; the width is kept as on
// zk://); file:// (the file <name>.count in the lock directory, the value
// with its width, rewritten under a lock; the same range rules). Others
// refuse Client::counter() with errc::unsupported.
//
// Thread-safety: a Counter may be used from any number of threads.
//
// Example:
//   auto orders = client->counter("orders/next-id");
//   std::int64_t id = orders.fetch_add(1) + 1;
//   std::int64_t seen = orders.load();
//   while (!orders.compare_exchange(seen, std::max<std::int64_t>(seen, 100))) {}
#pragma once

#include <dlock/status.h>

#include <cstdint>
#include <memory>
#include <string>

namespace dlock {

class Client;
namespace detail {
class ClientState;
}  // namespace detail

// How a counter the store does not have yet is created (zk://).
enum class CounterWidth {
  int32,  // 4-byte big-endian int: Apache Curator's SharedCount (the default)
  int64,  // 8-byte big-endian long: Apache Curator's DistributedAtomicLong
};

class Counter {
 public:
  Counter(Counter&&) noexcept = default;
  Counter& operator=(Counter&&) noexcept = default;
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;
  ~Counter() = default;

  std::int64_t load();
  void store(std::int64_t value);
  // Adds `delta` (may be negative); returns the value before.
  std::int64_t fetch_add(std::int64_t delta);
  // If the value is `expected`, sets it to `desired` and returns true;
  // otherwise returns false and `expected` becomes the current value.
  bool compare_exchange(std::int64_t& expected, std::int64_t desired);

  const std::string& name() const noexcept { return name_; }

 private:
  friend class Client;
  Counter(std::shared_ptr<detail::ClientState> client, std::string name, CounterWidth width);

  std::shared_ptr<detail::ClientState> client_;
  std::string name_;
  CounterWidth width_;
};

}  // namespace dlock
