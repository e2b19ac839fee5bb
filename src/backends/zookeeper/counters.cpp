#include "backends/zookeeper/counters.h"

#include "backends/zookeeper/errors.h"

namespace dlock::detail::zookeeper {
namespace {

constexpr int persistent = 0;

}  // namespace

Result<CountCell> CountNodes::read(const std::string& name, steady::time_point deadline, std::string_view step,
                                   const std::shared_ptr<Signal>& watch) {
  const std::string path = lock_path(session_.config(), name);
  auto call = watch ? session_.watch(path, watch, deadline) : session_.get(path, deadline);
  if (!call->wait_until(deadline)) return no_reply(step);
  if (call->rc == ZNONODE) return CountCell{};
  if (call->rc != ZOK) return to_status(call->rc, step, path);
  auto cell = decode_count(call->data, "zookeeper: " + path);
  if (!cell) return cell.status();
  cell->version = call->stat.version;
  return cell;
}

Result<bool> CountNodes::write_cell(const std::string& name, const CountCell& seen, const std::string& bytes,
                                    steady::time_point deadline, std::string_view step) {
  const std::string path = lock_path(session_.config(), name);
  if (seen.version) {
    auto set = session_.set(path, bytes, static_cast<int>(*seen.version), deadline);
    if (!set->wait_until(deadline)) return no_reply(step);
    if (set->rc == ZBADVERSION || set->rc == ZNONODE) return false;  // changed or deleted since we read it
    if (Status s = to_status(set->rc, step, path); !s) return s;
    return true;
  }
  auto create = session_.create_with_parents(path, persistent, deadline, step, bytes);
  if (!create) return create.status();
  const CallPtr& made = *create;
  if (!made->wait_until(deadline)) return no_reply(step);
  if (made->rc == ZNODEEXISTS) return false;  // someone created it first
  if (Status s = to_status(made->rc, step, path); !s) return s;
  return true;
}

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
