#include "core/node_worker.h"

#include "core/thread_name.h"

namespace dlock::detail {

NodeWorker::NodeWorker()
    : thread_([this] {
        name_this_thread("dlock-quorum");
        run();
      }) {}

NodeWorker::~NodeWorker() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  work_.notify_one();
  thread_.join();
}

void NodeWorker::post(std::function<void()> task) {
  {
    std::lock_guard lk(mu_);
    queue_.push_back(std::move(task));
  }
  work_.notify_one();
}

bool NodeWorker::claim() {
  std::lock_guard lk(mu_);
  if (!queue_.empty() || running_) return false;
  running_ = true;
  return true;
}

void NodeWorker::unclaim() {
  {
    std::lock_guard lk(mu_);
    running_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
  work_.notify_one();  // something may have been queued meanwhile
}

bool NodeWorker::run_here(const std::function<void()>& task) {
  if (!claim()) return false;
  Claimed claimed(*this);
  task();
  return true;
}

void NodeWorker::wait_idle(steady::time_point deadline) {
  std::unique_lock lk(mu_);
  idle_.wait_until(lk, deadline, [&] { return queue_.empty() && !running_; });
}

void NodeWorker::run() {
  std::unique_lock lk(mu_);
  for (;;) {
    // A task run_here() runs goes first: the next one waits for it.
    work_.wait(lk, [&] { return !running_ && (stopping_ || !queue_.empty()); });
    if (queue_.empty()) return;
    auto task = std::move(queue_.front());
    queue_.pop_front();
    running_ = true;
    lk.unlock();
    task();
    task = nullptr;  // what it captured goes before the next task starts
    lk.lock();
    running_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

}  // namespace dlock::detail
