#include "backends/zookeeper/latch.h"

namespace dlock::detail::zookeeper {

Result<LatchRead> Latches::read(const std::string& name, std::int64_t initial, bool watch,
                                steady::time_point deadline) {
  const std::string step = "reading latch '" + name + "'";
  std::unique_ptr<SessionWaiter> waiter;
  auto node = read_latch(nodes_, name, initial, deadline, step, [&] {
    auto signal = watch ? std::make_shared<Signal>() : nullptr;
    // Registered before the read, so a session change during it is not missed.
    waiter = watch ? std::make_unique<SessionWaiter>(session_, signal) : nullptr;
    return nodes_.read(name, deadline, step, signal);
  });
  if (!node) return node.status();
  LatchRead read{node->value, nullptr};
  if (node->value > 0) read.change = std::move(waiter);
  return read;
}

Result<std::int64_t> Latches::count_down(const std::string& name, std::int64_t initial, std::int64_t n,
                                         steady::time_point deadline) {
  return count_down_latch(nodes_, name, initial, n, deadline);
}

}  // namespace dlock::detail::zookeeper
