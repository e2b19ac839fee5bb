// driver.h — the seam between core and a backend.
//
// Core owns everything that is the same on every store: reentrancy, the
// acquire loop (deadline, backoff, waiting), the lease keeper, validation.
// A backend implements only the remote steps below. Every call must return
// within ClientOptions::op_timeout (errc::unavailable otherwise) and must
// translate its store's errors in one place.
#pragma once

#include <dlock/client.h>
#include <dlock/options.h>
#include <dlock/status.h>

#include "core/events.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace dlock::detail {

class BarrierDriver;  // barrier_driver.h
class CounterDriver;  // counter_driver.h
class LatchDriver;    // latch_driver.h
class SemaphoreDriver;  // semaphore_driver.h

using steady = std::chrono::steady_clock;

// Which primitive a request is for. A Mutex and a SharedMutex of the same
// name are different locks (on ZooKeeper, Curator's mutex and read-write
// lock layouts); a SharedMutex's writers exclude everyone, its readers only
// writers. An Election's leader is the holder of a `leader` (on ZooKeeper,
// Curator's LeaderLatch layout). A `permit` is one of a Semaphore's permits
// on a store that leases them (Backend::supports_permits); a `member` is a
// barrier member's leased entry (BarrierDriver::leased_members), which core
// only ever renews through a LockDriver.
enum class LockKind { mutex, write, read, leader, permit, member };

// For messages: "lock", "write lock", "read lock", "leadership", "permit", "barrier membership".
constexpr std::string_view kind_name(LockKind kind) {
  switch (kind) {
    case LockKind::mutex: return "lock";
    case LockKind::write: return "write lock";
    case LockKind::read: return "read lock";
    case LockKind::leader: return "leadership";
    case LockKind::permit: return "permit";
    case LockKind::member: return "barrier membership";
  }
  return "lock";
}

// What a backend needs to take, renew or release one lock for one owner.
struct LockRequest {
  std::string name;   // already validated by core and by Backend::validate_name
  std::string owner;  // client id (128 random bits, hex) + "-" + thread ordinal
  std::chrono::milliseconds lease{};
  LeaseMode mode = LeaseMode::watchdog;
  bool fair = false;  // FIFO among waiters (MutexOptions::fair)
  LockKind kind = LockKind::mutex;
  std::string data = {};  // stored with the holder's entry (an election's participant id); may be empty
  // kind permit: how many permits the caller declared for the name. The
  // store keeps the first declaration; a different one is refused with
  // invalid_argument naming both counts. `owner` is then unique per permit.
  std::int32_t permits = 0;
  // Not fair: a waiter that has waited this long is served before newcomers
  // (MutexOptions::max_barging_wait; 0 = as fair).
  std::chrono::milliseconds max_barging_wait = MutexOptions{}.max_barging_wait;
};

// The request for `name` as `kind` with `options` (the owner left to fill).
inline LockRequest lock_request(std::string name, LockKind kind, const MutexOptions& options, std::string data = {}) {
  LockRequest request{std::move(name), {}, options.lease, options.lease_mode, options.fair, kind, std::move(data)};
  request.max_barging_wait = options.max_barging_wait;
  return request;
}

// Backend state a grant needs later (an open descriptor, a row id, ...).
class GrantState {
 public:
  virtual ~GrantState() = default;
};

// The lock is ours.
struct Grant {
  std::uint64_t token = 0;
  // Until when the store keeps it for us, on this process's monotonic clock,
  // computed from the time the request was *sent* (not answered).
  steady::time_point valid_until = steady::time_point::max();
  std::unique_ptr<GrantState> state;
  // Fires when the store drops the lock by itself before any renewal could
  // tell (a ZooKeeper session expired or, by policy, was suspended); core
  // then marks the hold lost at once. Stores that only expire leases leave
  // it empty.
  std::stop_token dropped;
};

// Someone else holds it.
struct Busy {
  // When the holder's lease runs out as far as the store told us; the
  // acquire loop retries no later than this. max() if unknown.
  steady::time_point holder_expires = steady::time_point::max();
  // The store asks to be asked again by then even if nothing wakes the
  // waiter (a queue head that no release wakes while others may still
  // barge past it). max() if not.
  steady::time_point ask_again = steady::time_point::max();
};

using Attempt = std::variant<Grant, Busy>;

// A subscription to "this lock may have become free". Made before the
// retry that follows a Busy, so a release between that retry and the wait
// is not missed.
class Waiter {
 public:
  virtual ~Waiter() = default;
  // Blocks until notified or `until`. Spurious wake-ups are allowed.
  virtual Status wait_until(steady::time_point until) = 0;
  // After a wait: the lock if the store handed it to this waiter while it
  // waited (a release that gives the lock straight to the next in line),
  // with the token and a validity computed as conservatively as a
  // try_acquire's. nullopt: try again as usual. A grant not taken is
  // released by the Waiter when it goes.
  virtual std::optional<Grant> take_grant() { return std::nullopt; }
  // The non-blocking form of wait_until, for the async API: from now until
  // the Waiter goes, `notify` runs each time the waiter is notified, on a
  // thread of the client's (it must not block or call the store), possibly
  // once more while the Waiter is being destroyed. false: this Waiter can
  // only block, so its owner polls (Busy::holder_expires, backoff) instead.
  virtual bool on_notify(std::function<void()> notify) {
    (void)notify;
    return false;
  }
};

// One lease to renew in a batch; the backend fills `outcome`.
struct Renewal {
  const LockRequest* request = nullptr;
  Grant* grant = nullptr;
  // ok: the lease was extended and grant->valid_until updated.
  // lock_lost / not_owner: the store no longer has it for us.
  // unavailable: could not tell; core retries until valid_until passes. A
  // backend with other evidence that the hold lives on (etcd: the lease its
  // key is on, kept by a stream of its own) may move valid_until forward
  // to what that evidence proves, never past it.
  Status outcome;
};

// An attempt sent to the store whose answer is still to be read
// (LockDriver::start_try_acquire).
class PendingAttempt {
 public:
  virtual ~PendingAttempt() = default;
  // The attempt's outcome, as try_acquire() would have returned it; waits
  // for the store's answer (within op_timeout). Called at most once.
  virtual Result<Attempt> finish() = 0;
};

// An attempt already answered: what start_try_acquire returns by default.
class AnsweredAttempt final : public PendingAttempt {
 public:
  explicit AnsweredAttempt(Result<Attempt> outcome) : outcome_(std::move(outcome)) {}
  Result<Attempt> finish() override { return std::move(outcome_); }

 private:
  Result<Attempt> outcome_;
};

class LockDriver {
 public:
  virtual ~LockDriver() = default;

  // One attempt to take the lock: a Grant with a fresh fencing token, or Busy.
  virtual Result<Attempt> try_acquire(const LockRequest& request) = 0;

  // try_acquire in two halves, so that one thread can have attempts out on
  // several stores at once (a quorum's round: send to every node, then
  // read): this sends the attempt, finish() reads its answer. `request`
  // must live until finish() has returned. A pending attempt dropped
  // unfinished is finished by its destructor (the outcome dropped: a grant
  // in it runs out with its lease). By default the whole attempt runs here.
  virtual std::unique_ptr<PendingAttempt> start_try_acquire(const LockRequest& request) {
    return std::make_unique<AnsweredAttempt>(try_acquire(request));
  }

  // try_acquire for each of `requests`, in as few round trips as the store
  // allows (the async API attempts many acquisitions at once); by default
  // one after another.
  virtual std::vector<Result<Attempt>> try_acquire_many(std::span<const LockRequest* const> requests) {
    std::vector<Result<Attempt>> out;
    out.reserve(requests.size());
    for (const LockRequest* request : requests) out.push_back(try_acquire(*request));
    return out;
  }

  // nullptr if this backend has no notifications; core then polls with backoff.
  virtual std::unique_ptr<Waiter> watch(const LockRequest& request) = 0;

  // true: a Waiter holds the caller's place in the store's own queue
  // (ZooKeeper's sequential nodes), so core calls watch() before the first
  // attempt whenever the caller may wait, and try_acquire() then keeps the
  // place it took for as long as the Waiter lives. Without a Waiter,
  // try_acquire() leaves no trace when it returns Busy.
  virtual bool waits_in_queue() const { return false; }

  // Releases if (and only if) the store still has it for this owner and token.
  // lock_lost if it was not ours any more; the grant is consumed either way.
  virtual Status release(const LockRequest& request, Grant& grant) = 0;

  // The same without waiting for the store's answer (Mutex::unlock): sends
  // the release, returns, and `done` gets the outcome later, from a thread
  // of the client's (it must not block). Where the store runs a
  // connection's commands in order, a later command of this client on that
  // connection sees it applied. Everything needed is copied before it
  // returns. By default: release(), then done.
  virtual void release_async(const LockRequest& request, Grant& grant, std::function<void(Status)> done) {
    done(release(request, grant));
  }

  // Extends every lease in `batch`, in as few round trips as the store allows.
  virtual void renew(std::span<Renewal> batch) = 0;

  // Admin: frees the lock whoever holds it.
  virtual Status force_release(std::string_view name) = 0;

  // Held locks whose names start with prefix.
  virtual Result<std::vector<LockInfo>> list(std::string_view prefix) = 0;

  // Elections: the data of the entry that holds `name` as `kind` now
  // (nullopt: nobody holds it), and, if `watch`, a Waiter notified when
  // that may change (nullptr: the caller polls).
  struct Holder {
    std::optional<std::string> data;
    std::unique_ptr<Waiter> change;
  };
  virtual Result<Holder> holder(std::string_view name, LockKind kind, bool watch) {
    (void)name, (void)kind, (void)watch;
    return Status(errc::unsupported, "this backend has no elections");
  }
};

// One connected store.
class Backend {
 public:
  virtual ~Backend() = default;
  // Backend-specific name rules (length after encoding, characters); core
  // has already checked emptiness, the generic length limit and UTF-8.
  virtual Status validate_name(std::string_view name) const = 0;
  // Backend-specific option rules (a quorum's lease must outlast its
  // per-node timeout); core has already run validate(MutexOptions).
  virtual Status validate(const MutexOptions& options) const {
    (void)options;
    return {};
  }
  // Whether this backend keeps a FIFO queue of waiters (MutexOptions::fair).
  virtual bool supports_fair() const { return false; }
  // Whether its LockDriver takes LockKind::write and LockKind::read (SharedMutex).
  virtual bool supports_shared() const { return false; }
  // Whether a thread holding a SharedMutex's write lock may also take its
  // read lock (the store grants a read to the writer's own owner), keeping
  // it after the write lock is released (a downgrade).
  virtual bool supports_downgrade() const { return false; }
  // Whether its LockDriver takes LockKind::leader and answers holder() (Election).
  virtual bool supports_election() const { return false; }
  // Whether its LockDriver takes LockKind::permit: try_acquire grants while
  // fewer than request.permits live permits of the name are out (expired or
  // dead ones don't count) and is Busy otherwise; tokens strictly increase
  // across the permits of one name; release, renew, watch and list (kind
  // "permit", one row each) work per permit. Core then makes Semaphore out
  // of the acquire loop and the lease keeper, and semaphores() is nullptr.
  virtual bool supports_permits() const { return false; }
  virtual LockDriver& locks() = 0;
  // One round trip with no lock logic (health check, benchmark reference).
  virtual Status ping() = 0;
  // The session timeout the store agreed to, for stores whose locks live as
  // long as a session (ZooKeeper); nullopt for lease-based stores.
  virtual std::optional<std::chrono::milliseconds> session_timeout() const { return std::nullopt; }
  // Counter and Latch; nullptr where the backend has none.
  virtual CounterDriver* counters() { return nullptr; }
  virtual LatchDriver* latches() { return nullptr; }
  // Semaphore; nullptr where the backend has none.
  virtual SemaphoreDriver* semaphores() { return nullptr; }
  // Barrier; nullptr where the backend has none.
  virtual BarrierDriver* barriers() { return nullptr; }

  // Waits (until `deadline`) for the outcome of every release_async still
  // unanswered, so that no `done` runs after the client goes.
  virtual void flush(steady::time_point deadline) { (void)deadline; }

  // Where the backend's session code reports a connection lost or restored
  // (counted in ClientStats, logged through ClientOptions::log).
  Events& events() noexcept { return events_; }

 private:
  Events events_;
};

}  // namespace dlock::detail
