// queue_waiter.h — the Waiter of a store whose waiters hold a place in its
// own queue (LockDriver::waits_in_queue: ZooKeeper's sequential nodes,
// etcd's keys ordered by revision).
#pragma once

#include "core/driver.h"

#include <functional>
#include <memory>
#include <string>
#include <utility>

namespace dlock::detail {

// Waits on its contender's signal, and gives the place up when it goes:
// `backend.leave(key, contender)` (the backend removes the contender's
// entry unless it became the lock). Contender::signal needs
// wait_until(steady::time_point) and call_back(std::function<void()>).
template <class Backend, class Contender>
class QueueWaiter final : public Waiter {
 public:
  // key: (owner, name) of the contender.
  QueueWaiter(Backend& backend, std::pair<std::string, std::string> key, std::shared_ptr<Contender> contender)
      : backend_(backend), key_(std::move(key)), contender_(std::move(contender)) {}
  ~QueueWaiter() override { backend_.leave(key_, *contender_); }
  QueueWaiter(const QueueWaiter&) = delete;
  QueueWaiter& operator=(const QueueWaiter&) = delete;

  Status wait_until(steady::time_point until) override {
    contender_->signal->wait_until(until);
    return {};
  }
  bool on_notify(std::function<void()> notify) override {
    contender_->signal->call_back(std::move(notify));
    return true;
  }

 private:
  Backend& backend_;
  std::pair<std::string, std::string> key_;
  std::shared_ptr<Contender> contender_;
};

}  // namespace dlock::detail
