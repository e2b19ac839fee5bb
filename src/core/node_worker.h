// node_worker.h — one thread per quorum node (quorum_backend.cpp), running
// the node's calls in the order they were posted, so a release is on its
// way before the same client's next attempt. A caller may instead make a
// node's call on its own thread when nothing of that node is queued or
// running (run_here), which saves a thread hop without reordering.
#pragma once

#include "core/driver.h"

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace dlock::detail {

class NodeWorker {
 public:
  NodeWorker();
  // What is queued still runs: every task is bounded by its own deadline.
  ~NodeWorker();
  NodeWorker(const NodeWorker&) = delete;
  NodeWorker& operator=(const NodeWorker&) = delete;

  void post(std::function<void()> task);

  // Lets the calling thread make the node's calls until unclaim(), if
  // nothing is queued or running (so the node's calls keep their order);
  // false if it could not. Tasks posted meanwhile wait for unclaim().
  bool claim();
  void unclaim();

  // unclaim() when it goes, whatever happened meanwhile.
  class Claimed {
   public:
    explicit Claimed(NodeWorker& worker) : worker_(worker) {}
    ~Claimed() { worker_.unclaim(); }
    Claimed(const Claimed&) = delete;
    Claimed& operator=(const Claimed&) = delete;

   private:
    NodeWorker& worker_;
  };

  // Runs `task` on the calling thread instead, if it can claim the node.
  bool run_here(const std::function<void()>& task);

  // Waits until nothing is queued or running, or `deadline`.
  void wait_idle(steady::time_point deadline);

 private:
  void run();

  std::mutex mu_;
  std::condition_variable work_, idle_;
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  bool running_ = false;                     // guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  std::thread thread_;                       // last: starts once the rest exists
};

}  // namespace dlock::detail
