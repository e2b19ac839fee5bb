#include "core/lease_keeper.h"

#include "core/thread_name.h"

#include <algorithm>

namespace dlock::detail {
namespace {

// When a renewal could not reach the store, try again this often (but at
// least a few times before the lease runs out).
std::chrono::milliseconds retry_after_failure(const HeldLock& h) {
  return std::clamp(h.renew_every / 4, std::chrono::milliseconds(1), std::chrono::milliseconds(500));
}

// When the keeper must look at this hold next.
steady::time_point due_at(const HeldLock& h) {
  if (h.request.mode == LeaseMode::fixed) return h.lease_end();
  return std::min(h.next_renewal, h.lease_end());
}

// Watchdog leases due within half an interval are renewed with the batch
// that is due now: after one period every lease of the client shares one
// schedule, so renewals cost one round trip per period, not one per lease.
std::chrono::milliseconds early_by(const HeldLock& h) {
  return h.request.mode == LeaseMode::watchdog ? h.renew_every / 2 : std::chrono::milliseconds::zero();
}

}  // namespace

LeaseKeeper::LeaseKeeper(LockDriver& driver) : driver_(driver), thread_([this] {
      name_this_thread("dlock-keeper");
      run();
    }) {}

LeaseKeeper::~LeaseKeeper() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void LeaseKeeper::add(std::shared_ptr<HeldLock> hold) {
  bool wake;
  {
    std::lock_guard lk(mu_);
    wake = due_at(*hold) < wakes_at_;
    hold->in_keeper = true;
    const HeldLock* key = hold.get();
    holds_.emplace(key, std::move(hold));
  }
  if (wake) cv_.notify_all();
}

void LeaseKeeper::remove(HeldLock* hold) {
  std::lock_guard lk(mu_);
  hold->in_keeper = false;
  holds_.erase(hold);
}

LeaseKeeper::Counters LeaseKeeper::counters() const {
  std::lock_guard lk(mu_);
  return counters_;
}


void LeaseKeeper::run() {
  std::unique_lock lk(mu_);
  while (!stopping_) {
    auto next = steady::time_point::max();
    for (const auto& [key, h] : holds_)
      if (!h->lost.load()) next = std::min(next, due_at(*h));
    if (steady::now() < next) {
      wakes_at_ = next;
      if (next == steady::time_point::max()) cv_.wait(lk);
      else cv_.wait_until(lk, next);
      wakes_at_ = steady::time_point::min();  // awake: add() needn't notify
      continue;  // re-scan: holds may have come or gone
    }
    auto now = steady::now();
    std::vector<std::shared_ptr<HeldLock>> due;
    for (const auto& [key, h] : holds_)
      if (!h->lost.load() && due_at(*h) <= now + early_by(*h)) due.push_back(h);
    lk.unlock();
    renew_due(due);
    lk.lock();
  }
}

void LeaseKeeper::renew_due(std::vector<std::shared_ptr<HeldLock>>& due) {
  // Each hold in the batch is marked `renewing` (under its own mutex, for a
  // moment): release() waits for that flag to drop before it marks the hold
  // released, so no renewal is sent after a release, and no hold's mutex is
  // held across the round trip (a batch may hold thousands).
  std::vector<Renewal> batch;
  std::vector<HeldLock*> batched;
  // Marked lost only after every lock is dropped: stop callbacks may call
  // back into the client.
  std::vector<std::pair<HeldLock*, std::string>> to_lose;
  const auto now = steady::now();
  for (auto& h : due) {
    std::lock_guard g(h->mu);
    if (h->released || h->lost.load()) continue;
    {
      std::lock_guard lk(mu_);
      if (!h->in_keeper) continue;  // removed after it was found due
    }
    if (now >= h->grant.valid_until) {
      // The store may have freed it already.
      to_lose.emplace_back(h.get(), std::string(h->expiry_reason()));
      continue;
    }
    if (h->request.mode == LeaseMode::fixed) continue;
    h->renewing = true;
    batch.push_back(Renewal{&h->request, &h->grant, {}});
    batched.push_back(h.get());
  }
  if (!batch.empty()) {
    driver_.renew(batch);
    const auto after = steady::now();
    {
      std::lock_guard lk(mu_);
      ++counters_.batches;
      for (std::size_t i = 0; i < batch.size(); ++i) {
        HeldLock& h = *batched[i];
        const Status& s = batch[i].outcome;
        h.set_lease_end(h.grant.valid_until);
        if (s.ok()) {
          ++counters_.renewals;
          // From when the batch was sent (as the lease itself is), not when
          // it was answered: otherwise every batch's round trip pushes its
          // group later, and two groups half a period apart never merge.
          h.next_renewal = std::max(now + h.renew_every, after);
          // A store may extend it for less than the lease (etcd: no further
          // than its session lease's deadline): renew again with a third of
          // that left at the latest, as for a short first grant.
          if (h.grant.valid_until != steady::time_point::max())
            h.next_renewal = std::max(std::min(h.next_renewal, now + (h.grant.valid_until - now) * 2 / 3), after);
        } else if (s.code() == errc::lock_lost || s.code() == errc::not_owner) {
          to_lose.emplace_back(&h, "the store refused its renewal (" + s.message() + ")");
        } else if (after >= h.lease_end()) {
          ++counters_.failures;
          to_lose.emplace_back(&h, "its lease ran out while renewals failed (" + s.message() + ")");
        } else {
          ++counters_.failures;
          h.next_renewal = after + retry_after_failure(h);
        }
      }
    }
    for (HeldLock* h : batched) {
      {
        std::lock_guard g(h->mu);
        h->renewing = false;
      }
      h->renewed.notify_all();
    }
  }
  for (auto& [h, why] : to_lose) h->mark_lost(why);
}

}  // namespace dlock::detail
