// revalidator.h — the thread that re-validates this client's holds once the
// store changed under them: a new master (redis+sentinel's failover), or
// (redis+cluster) slots served by another master than before (a failover or
// a migration the router saw in a MOVED or a re-read slot map). The check
// itself is the backend's (RedisBackend::revalidate): it runs here, never
// inside a caller's command, so a router that notices the change in the
// middle of a call only asks for it.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

namespace dlock::detail::redis {

class Revalidator {
 public:
  // The holds in the given slots (all of them if the set is empty), checked
  // on the store; false if it did not answer.
  using Check = std::function<bool(const std::set<int>& slots)>;

  // Starts the thread. While `check` returns false it runs again every
  // 100 ms, for up to 5 s (a promoted replica may take that long to serve).
  explicit Revalidator(Check check);
  ~Revalidator();  // stop()
  Revalidator(const Revalidator&) = delete;
  Revalidator& operator=(const Revalidator&) = delete;

  // The holds in `slots` (empty: every hold) are to be checked, soon.
  void request(const std::set<int>& slots = {});
  // Joins the thread; `check` does not run after it returns.
  void stop();

 private:
  void run();

  const Check check_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool all_ = false;      // mu_: every hold is to be checked
  std::set<int> slots_;   // mu_: else those in these slots
  bool stopping_ = false;  // mu_
  std::thread thread_;
};

}  // namespace dlock::detail::redis
