// pending_replies.h — the answers a backend still owes for calls it did not
// wait for (LockDriver::release_async), so that Backend::flush can wait for
// them and no `done` runs once the client has gone.
#pragma once

#include "core/driver.h"

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>

namespace dlock::detail {

class PendingReplies {
 public:
  // `done`, counted until it runs. The returned function may be called from
  // any thread, once; after close() it no longer calls `done`.
  std::function<void(Status)> track(std::function<void(Status)> done) {
    {
      std::lock_guard lk(state_->mu);
      ++state_->unanswered;
    }
    return [state = state_, done = std::move(done)](Status s) {
      std::lock_guard lk(state->mu);
      // Under the mutex: close() cannot return while a `done` runs.
      if (!state->closed) done(std::move(s));
      --state->unanswered;
      state->cv.notify_all();
    };
  }

  // Waits until every tracked `done` has run, or `deadline`; from then on
  // none runs (an answer after it is dropped).
  void close(steady::time_point deadline) {
    std::unique_lock lk(state_->mu);
    state_->cv.wait_until(lk, deadline, [&] { return state_->unanswered == 0; });
    state_->closed = true;
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    int unanswered = 0;
    bool closed = false;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace dlock::detail
