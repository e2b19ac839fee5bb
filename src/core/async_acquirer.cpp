#include "core/async_acquirer.h"

#include "core/thread_name.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dlock::detail {

struct AsyncAcquirer::Pending {
  LockRequest request;
  // Refers to `request`; reset (its Waiter, and so its queue entry, gone)
  // before `done` runs.
  std::optional<Acquisition> acquisition;
  Done done;
  std::unique_ptr<std::stop_callback<std::function<void()>>> on_stop;
  bool calls_back = false;  // the thread's: its Waiter took an on_notify callback
  // Guarded by Shared::mu:
  bool due = true;        // attempt in the next round (new, or asked to retry at once)
  bool notified = false;  // its Waiter called back
  bool cancelled = false;
  bool waiting = false;   // between a Wait and the round that ends it
  steady::time_point until{};                           // the Wait's end
  steady::time_point wake = steady::time_point::max();  // due by itself then (a poll may come sooner)
};

struct AsyncAcquirer::Shared {
  Shared(LockDriver& d, const ClientOptions& o, std::atomic<std::uint64_t>& w, std::atomic<std::uint64_t>& ws)
      : driver(d), options(o), wakeups(w), waits(ws) {}

  // Sets `flag` of `key` if it is still pending, and wakes the thread.
  void poke(const Pending* key, bool Pending::*flag) {
    {
      std::lock_guard lk(mu);
      auto it = pending.find(key);
      if (it == pending.end()) return;
      (*it->second).*flag = true;
    }
    cv.notify_one();
  }

  // Ends `p`: out of the table, its Waiter gone (and with it the store's
  // queue entry), then its completion.
  void complete(const std::shared_ptr<Pending>& p, Acquisition::Outcome outcome) {
    {
      std::lock_guard lk(mu);
      pending.erase(p.get());
    }
    p->on_stop.reset();  // (waits for a stop callback under way on another thread)
    p->acquisition.reset();
    auto done = std::move(p->done);
    done(std::move(p->request), std::move(outcome));
  }

  // A grant for `p`. One whose answer came after its lease ran out may be
  // someone else's already: given back, and tried again until the deadline.
  void granted(const std::shared_ptr<Pending>& p, Grant grant) {
    if (grant.valid_until > steady::now()) return complete(p, std::optional<Grant>(std::move(grant)));
    (void)driver.release(p->request, grant);
    if (steady::now() >= p->acquisition->deadline()) return complete(p, std::optional<Grant>());
    std::lock_guard lk(mu);
    p->due = true;
  }

  LockDriver& driver;
  const ClientOptions& options;
  std::atomic<std::uint64_t>& wakeups;
  std::atomic<std::uint64_t>& waits;
  std::mutex mu;
  std::condition_variable cv;
  std::unordered_map<const Pending*, std::shared_ptr<Pending>> pending;  // guarded by mu
  bool stopping = false;                                                 // guarded by mu
  // The destructor ran on the thread (inside a completion): the thread
  // returns as soon as that completion does, touching nothing else.
  std::atomic<bool> abandoned{false};
};

AsyncAcquirer::AsyncAcquirer(LockDriver& driver, const ClientOptions& options, std::atomic<std::uint64_t>& wakeups,
                             std::atomic<std::uint64_t>& waits)
    : shared_(std::make_shared<Shared>(driver, options, wakeups, waits)),
      thread_([shared = shared_] {
        name_this_thread("dlock-async");
        run(shared);
      }) {}

AsyncAcquirer::~AsyncAcquirer() {
  {
    std::lock_guard lk(shared_->mu);
    shared_->stopping = true;
  }
  shared_->cv.notify_all();
  if (thread_.get_id() == std::this_thread::get_id()) {
    shared_->abandoned = true;
    thread_.detach();
  } else {
    thread_.join();
  }
  decltype(Shared::pending) left;
  {
    std::lock_guard lk(shared_->mu);
    left.swap(shared_->pending);
  }
  // Every Waiter goes before any completion runs.
  for (auto& [key, p] : left) {
    p->on_stop.reset();
    p->acquisition.reset();
  }
  for (auto& [key, p] : left) {
    auto done = std::move(p->done);
    const std::string what = std::string(kind_name(p->request.kind)) + " '" + p->request.name + "'";
    done(std::move(p->request),
         Status(errc::unavailable, "acquiring " + what + ": the client was destroyed before it was acquired"));
  }
}

void AsyncAcquirer::start(LockRequest request, steady::time_point deadline, std::stop_token stop, Done done) {
  auto p = std::make_shared<Pending>();
  p->request = std::move(request);
  p->acquisition.emplace(shared_->driver, p->request, deadline, shared_->options, shared_->wakeups, &shared_->waits);
  p->done = std::move(done);
  const Pending* key = p.get();
  if (stop.stop_possible())
    p->on_stop = std::make_unique<std::stop_callback<std::function<void()>>>(
        stop, std::function<void()>([weak = std::weak_ptr<Shared>(shared_), key] {
          if (auto shared = weak.lock()) shared->poke(key, &Pending::cancelled);
        }));
  {
    std::lock_guard lk(shared_->mu);
    // A stop before it was listed found nothing to mark.
    p->cancelled = stop.stop_requested();
    shared_->pending.emplace(key, std::move(p));
  }
  shared_->cv.notify_one();
}

void AsyncAcquirer::run(const std::shared_ptr<Shared>& shared) {
  Shared& s = *shared;
  std::vector<std::shared_ptr<Pending>> cancelled, due, attempting;
  std::vector<char> woke_early, was_waiting;
  std::vector<const LockRequest*> requests;
  std::unique_lock lk(s.mu);
  while (!s.stopping) {
    // This round: the cancelled, and those due (new, woken, or whose wait
    // or poll time has come).
    const auto now = steady::now();
    auto next = steady::time_point::max();
    for (auto& [key, p] : s.pending) {
      if (p->cancelled) cancelled.push_back(p);
      else if (p->due || p->notified || p->wake <= now) due.push_back(p);
      else next = std::min(next, p->wake);
    }
    if (cancelled.empty() && due.empty()) {
      if (next == steady::time_point::max()) s.cv.wait(lk);
      else s.cv.wait_until(lk, next);
      continue;
    }
    woke_early.assign(due.size(), 0);
    was_waiting.assign(due.size(), 0);
    for (std::size_t i = 0; i < due.size(); ++i) {
      Pending& p = *due[i];
      was_waiting[i] = p.waiting;
      woke_early[i] = p.waiting && p.notified && now < p.until;
      p.due = p.notified = p.waiting = false;
      p.wake = steady::time_point::max();
    }
    lk.unlock();

    // Cancelled: no attempt; the Waiter leaves the store's queue first.
    for (auto& p : cancelled) {
      const std::string what = std::string(kind_name(p->request.kind)) + " '" + p->request.name + "'";
      s.complete(p, Status(errc::cancelled, "acquiring " + what + ": cancelled through its stop_token"));
      if (s.abandoned) return;
    }
    // A wait that ended may have been handed the lock by the release.
    for (std::size_t i = 0; i < due.size(); ++i) {
      auto& p = due[i];
      if (was_waiting[i]) {
        // The Waiter's own wait, already over (it does not block), ends the
        // wait as the blocking loop's would, so that take_grant() sees
        // what the wake-up brought.
        if (Waiter* waiter = p->acquisition->waiter()) {
          if (Status st = waiter->wait_until(steady::now()); !st) {
            s.complete(p, std::move(st));
            if (s.abandoned) return;
            continue;
          }
        }
        if (auto grant = p->acquisition->woken(woke_early[i])) {
          s.granted(p, std::move(*grant));
          if (s.abandoned) return;
          continue;
        }
      }
      p->acquisition->prepare();
      attempting.push_back(p);
      requests.push_back(&p->request);
    }
    // Every attempt of the round at once.
    auto attempts = requests.empty() ? std::vector<Result<Attempt>>() : s.driver.try_acquire_many(requests);
    for (std::size_t i = 0; i < attempting.size(); ++i) {
      auto& p = attempting[i];
      auto step = p->acquisition->settle(std::move(attempts[i]));
      if (auto* outcome = std::get_if<Acquisition::Outcome>(&step)) {
        if (*outcome && **outcome) s.granted(p, std::move(***outcome));
        else s.complete(p, std::move(*outcome));
        if (s.abandoned) return;
        continue;
      }
      if (std::holds_alternative<Acquisition::Again>(step)) {
        std::lock_guard g(s.mu);
        p->due = true;
        continue;
      }
      const auto& wait = std::get<Acquisition::Wait>(step);
      if (wait.waiter && !p->calls_back) {
        p->calls_back = wait.waiter->on_notify([weak = std::weak_ptr<Shared>(shared), key = p.get()] {
          if (auto alive = weak.lock()) alive->poke(key, &Pending::notified);
        });
      }
      // A Waiter that cannot call back is polled.
      const auto wake = wait.waiter && !p->calls_back ? p->acquisition->poll_until(wait) : wait.until;
      std::lock_guard g(s.mu);
      p->waiting = true;
      p->until = wait.until;
      p->wake = wake;
    }
    // Dropped without the mutex: the last reference takes a Waiter with it.
    cancelled.clear();
    due.clear();
    attempting.clear();
    requests.clear();
    lk.lock();
  }
}

}  // namespace dlock::detail
