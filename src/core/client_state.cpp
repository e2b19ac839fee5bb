#include "core/client_state.h"

#include "core/acquire.h"
#include "core/owner_id.h"
#include "core/permit_semaphores.h"
#include "core/validate.h"

#include <algorithm>

namespace dlock::detail {

ClientState::ClientState(std::unique_ptr<Backend> backend, std::string client_id, std::string url,
                         std::string scheme, ClientOptions options)
    : backend_(std::move(backend)),
      client_id_(std::move(client_id)),
      url_(std::move(url)),
      scheme_(std::move(scheme)),
      options_(options),
      keeper_(std::make_unique<LeaseKeeper>(backend_->locks())) {
  backend_->events().set_log(options_.log);
}

ClientState::~ClientState() {
  // What is still acquiring asynchronously ends first: no completion runs
  // after this line, and none holds a lock.
  async_.reset();
  keeper_.reset();  // no renewal from here on
  std::lock_guard lk(mu_);
  // Release what is still held, but stop talking to a store that stopped
  // answering: one op_timeout at most, not one per lock (the leases run out).
  bool store_answers = true;
  for (auto& [key, hold] : holds_) {
    {
      std::lock_guard g(hold->mu);
      if (hold->released) continue;
    }
    hold->stop_renewals();
    if (store_answers && backend_->locks().release(hold->request, hold->grant).code() == errc::unavailable)
      store_answers = false;
  }
  // Every unlock() still in flight is answered (or given up on) before the
  // counters it reports to go.
  backend_->flush(steady::now() + (store_answers ? options_.op_timeout : std::chrono::milliseconds(0)));
}

Result<bool> ClientState::acquire(const std::string& name, LockKind kind, const MutexOptions& options,
                                  steady::time_point deadline, std::string data) {
  const Key key{name, kind, thread_ordinal()};
  // Only this thread adds, counts or removes its own hold, so the hold
  // found here stays ours; check_lost() may run stop callbacks, which may
  // call back into the client, so no lock is held around it.
  // Reading and writing one SharedMutex in one thread would wait for
  // itself (as with std::shared_mutex), but for a writer that reads too
  // where the store allows it (a downgrade).
  if (kind == LockKind::read || kind == LockKind::write) {
    const bool reading = kind == LockKind::read;
    if (!(reading && backend_->supports_downgrade()) && find(name, reading ? LockKind::write : LockKind::read))
      return Result<bool>(errc::would_deadlock,
                          "lock '" + name + "': this thread holds it " + (reading ? "exclusively" : "shared") +
                              "; taking it " + (reading ? "shared" : "exclusively") +
                              " too would wait for itself (unlock it first)");
  }
  if (auto held = find(name, kind)) {
    if (!options.reentrant)
      return Result<bool>(errc::would_deadlock,
                          "lock '" + name + "': already held by this thread and the mutex is not reentrant");
    if (held->check_lost())
      return Result<bool>(errc::lock_lost, "lock '" + name + "': this thread's hold was lost; unlock it first");
    std::lock_guard lk(mu_);
    ++held->count;
    return true;
  }
  LockRequest request = lock_request(name, kind, options, std::move(data));
  request.owner = owner_for_this_thread();
  auto got = take(request, deadline);
  if (!got) return got.status();
  if (!*got) return false;
  auto hold = keep(std::move(request), std::move(**got), options);
  hold->thread = std::get<2>(key);
  {
    std::lock_guard lk(mu_);
    holds_.emplace(key, hold);
  }
  return true;
}

Result<std::optional<Grant>> ClientState::take(const LockRequest& request, steady::time_point deadline) {
  const auto start = steady::now();
  for (;;) {
    auto got = detail::acquire(backend_->locks(), request, deadline, options_, wakeups_, &waits_);
    if (!got || !*got) return got;
    // A grant whose answer took longer than its lease may already belong to
    // someone else: give it back and try again (or report the timeout).
    if ((*got)->valid_until > steady::now()) {
      record_latency(start);
      return got;
    }
    (void)backend_->locks().release(request, **got);
    if (steady::now() >= deadline) return std::optional<Grant>();
  }
}

void ClientState::record_latency(steady::time_point start) noexcept {
  const auto took = steady::now() - start;
  const auto& bounds = LatencyHistogram::bounds;
  const auto bucket = static_cast<std::size_t>(
      std::lower_bound(bounds.begin(), bounds.end(), std::chrono::duration<double>(took).count()) - bounds.begin());
  latency_counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  latency_sum_ns_.fetch_add(static_cast<std::uint64_t>(std::chrono::nanoseconds(took).count()),
                            std::memory_order_relaxed);
}

void ClientState::acquire_async(LockRequest request, const MutexOptions& options, steady::time_point deadline,
                                std::stop_token stop, AsyncCallback done) {
  if (!done)
    throw Error(errc::invalid_argument, "acquiring " + std::string(kind_name(request.kind)) + " '" + request.name +
                                            "' asynchronously: the callback is empty");
  std::call_once(async_started_, [&] {
    async_ = std::make_unique<AsyncAcquirer>(backend_->locks(), options_, wakeups_, waits_);
  });
  request.owner = owner_of_its_own(client_id_);
  const auto start = steady::now();
  // The acquirer is this client's own: it ends before the client does, so
  // `this` outlives every completion; weak_from_this() tells whether the
  // client is still wanted (a Hold must keep it alive).
  async_->start(std::move(request), deadline, std::move(stop),
                [this, self = weak_from_this(), options, start, done = std::move(done)](
                    LockRequest asked, AsyncAcquirer::Outcome got) {
                  if (!got) return done(got.status(), dlock::Hold());
                  if (!*got) return done({}, dlock::Hold());
                  auto client = self.lock();
                  if (!client) {
                    (void)backend_->locks().release(asked, **got);
                    return done(Status(errc::unavailable, "acquiring " + std::string(kind_name(asked.kind)) +
                                                              " '" + asked.name +
                                                              "': the client was destroyed before it was acquired"),
                                dlock::Hold());
                  }
                  record_latency(start);
                  auto hold = keep(std::move(asked), std::move(**got), options);
                  done({}, dlock::Hold(std::move(client), std::move(hold)));
                });
}

std::shared_ptr<HeldLock> ClientState::keep(LockRequest request, Grant grant, const MutexOptions& options) {
  acquisitions_.fetch_add(1, std::memory_order_relaxed);
  auto hold = std::make_shared<HeldLock>();
  hold->request = std::move(request);
  hold->grant = std::move(grant);
  hold->token = hold->grant.token;
  hold->renew_every = renew_interval(options);
  // A grant shorter than the lease (a handover's first lease, a slow answer)
  // is renewed early: with a third of its validity left at the latest.
  const auto now = steady::now();
  hold->next_renewal = now + hold->renew_every;
  if (hold->grant.valid_until != steady::time_point::max())
    hold->next_renewal = std::min(hold->next_renewal, now + (hold->grant.valid_until - now) * 2 / 3);
  hold->set_lease_end(hold->grant.valid_until);
  hold->lost_counter = &leases_lost_;
  hold->events = &backend_->events();
  if (hold->grant.dropped.stop_possible()) {
    HeldLock* h = hold.get();
    hold->on_dropped = std::make_unique<std::stop_callback<std::function<void()>>>(
        hold->grant.dropped, std::function<void()>([h] { h->mark_lost("the store dropped it (its session ended)"); }));
  }
  if (hold->grant.valid_until != steady::time_point::max()) keeper_->add(hold);
  return hold;
}

Status ClientState::release(const std::string& name, LockKind kind, bool wait) noexcept {
  try {
    std::shared_ptr<HeldLock> hold;
    {
      std::lock_guard lk(mu_);
      auto it = holds_.find(Key{name, kind, thread_ordinal()});
      if (it == holds_.end()) {
        failed_releases_.fetch_add(1);
        return Status(errc::not_owner, "unlock '" + name + "': the calling thread does not hold this lock");
      }
      if (--it->second->count > 0) return {};
      hold = std::move(it->second);
      holds_.erase(it);
    }
    return let_go(*hold, true, wait);
  } catch (const std::exception& e) {
    failed_releases_.fetch_add(1);
    return Status(errc::internal, std::string("unlock '") + name + "': " + e.what());
  }
}

void ClientState::account_release(const Status& s, LockKind kind, const std::string& name) noexcept {
  try {
    (s.ok() ? releases_ : failed_releases_).fetch_add(1, std::memory_order_relaxed);
    if (!s.ok())
      backend_->events().log(LogLevel::warning,
                             std::string("releasing ") + std::string(kind_name(kind)) + " '" + name + "' failed: " +
                                 s.message());
  } catch (...) {
  }
}

Status ClientState::let_go(HeldLock& hold, bool release, bool wait) noexcept {
  const std::string& name = hold.request.name;
  try {
    const bool was_lost = hold.lost.load() || hold.past_deadline();
    // After this no renewal touches the grant, so the release itself runs
    // without hold.mu and never holds up the lease keeper.
    keeper_->remove(&hold);
    hold.stop_renewals();
    if (release && !wait && !was_lost) {
      // The store's answer comes later; it is counted and logged then.
      backend_->locks().release_async(hold.request, hold.grant,
                                      [this, kind = hold.request.kind, name](Status s) { account_release(s, kind, name); });
      return {};
    }
    Status s = release ? backend_->locks().release(hold.request, hold.grant) : Status{};
    if (was_lost) {
      hold.mark_lost(hold.expiry_reason());  // outside every lock: it may run stop callbacks
      // What the caller must learn is that its critical section ran
      // unprotected; whether the store could also be told is secondary.
      if (s.code() != errc::lock_lost)
        s = Status(errc::lock_lost, "unlock '" + name + "': the lease had been lost before unlock" +
                                        (s.ok() ? std::string() : " (and releasing failed too: " + s.message() + ")"));
    }
    account_release(s, hold.request.kind, name);
    return s;
  } catch (const std::exception& e) {
    failed_releases_.fetch_add(1);
    return Status(errc::internal, std::string("unlock '") + name + "': " + e.what());
  }
}

SemaphoreDriver* ClientState::semaphores() {
  if (auto* own = backend_->semaphores()) return own;
  if (!backend_->supports_permits()) return nullptr;
  std::lock_guard lk(mu_);
  if (!permits_) permits_ = make_permit_semaphores(*this);
  return permits_.get();
}

std::string ClientState::owner_for_this_thread() const { return detail::owner_for_this_thread(client_id_); }

std::shared_ptr<HeldLock> ClientState::find(const std::string& name, LockKind kind) const {
  std::lock_guard lk(mu_);
  auto it = holds_.find(Key{name, kind, thread_ordinal()});
  return it == holds_.end() ? nullptr : it->second;
}

ClientStats ClientState::stats() const {
  auto k = keeper_->counters();
  ClientStats out;
  out.acquisitions = acquisitions_.load();
  out.releases = releases_.load();
  out.failed_releases = failed_releases_.load();
  out.renewals = k.renewals;
  out.renewal_batches = k.batches;
  out.leases_lost = leases_lost_.load();
  out.wakeups = wakeups_.load();
  out.waits = waits_.load();
  out.renewal_failures = k.failures;
  out.disconnects = backend_->events().disconnects();
  out.reconnects = backend_->events().reconnects();
  for (std::size_t i = 0; i < latency_counts_.size(); ++i) {
    out.acquire_latency.counts[i] = latency_counts_[i].load(std::memory_order_relaxed);
    out.acquire_latency.count += out.acquire_latency.counts[i];
  }
  out.acquire_latency.sum_seconds = static_cast<double>(latency_sum_ns_.load()) / 1e9;
  return out;
}

Status ClientState::force_release(const std::string& name) {
  return backend_->locks().force_release(name);
}

}  // namespace dlock::detail
