#include "backends/zookeeper/latch.h"

#include "backends/zookeeper/counter.h"

#include <algorithm>

namespace dlock::detail::zookeeper {

Result<LatchRead> Latches::read(const std::string& name, std::int64_t initial, bool watch,
                                steady::time_point deadline) {
  const std::string step = "reading latch '" + name + "'";
  // Refused even when the latch exists (and this count would go unused): the same call
  // must not succeed or fail depending on who came first.
  auto initial_bytes = encode_count(initial, CountNode{}, CounterWidth::int32, "latch count");
  if (!initial_bytes) return initial_bytes.status();
  const std::string path = lock_path(session_.config(), name);
  while (steady::now() < deadline) {
    auto signal = watch ? std::make_shared<Signal>() : nullptr;
    // Registered before the read, so a session change during it is not missed.
    auto waiter = watch ? std::make_unique<SessionWaiter>(session_, signal) : nullptr;
    auto node = read_count(session_, path, deadline, step, signal);
    if (!node) return node.status();
    if (!node->version) {
      // Not there yet: we are the first, our count is its count. Then read
      // again (whoever created it, the watch must be on the node).
      auto made = write_count(session_, path, *node, *initial_bytes, deadline, "creating latch '" + name + "'");
      if (!made) return made.status();
      continue;
    }
    LatchRead read{node->value, nullptr};
    if (node->value > 0) read.change = std::move(waiter);
    return read;
  }
  return contended(step);
}

Result<std::int64_t> Latches::count_down(const std::string& name, std::int64_t initial, std::int64_t n,
                                         steady::time_point deadline) {
  const std::string step = "counting down latch '" + name + "'";
  auto initial_bytes = encode_count(initial, CountNode{}, CounterWidth::int32, "latch count");
  if (!initial_bytes) return initial_bytes.status();
  const std::string path = lock_path(session_.config(), name);
  while (steady::now() < deadline) {
    auto node = read_count(session_, path, deadline, step);
    if (!node) return node.status();
    if (!node->version) {
      auto made = write_count(session_, path, *node, *initial_bytes, deadline, "creating latch '" + name + "'");
      if (!made) return made.status();
      continue;
    }
    const std::int64_t after = std::max<std::int64_t>(0, node->value - n);
    if (after == node->value) return after;  // already 0, or n == 0: nothing to write
    auto after_bytes = encode_count(after, *node, CounterWidth::int32, "latch count");
    if (!after_bytes) return after_bytes.status();
    auto written = write_count(session_, path, *node, *after_bytes, deadline, step);
    if (!written) return written.status();
    if (*written) return after;
  }
  return contended(step);
}

}  // namespace dlock::detail::zookeeper
