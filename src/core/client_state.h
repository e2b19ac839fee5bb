// client_state.h — what a Client and all its Mutex handles share.
//
// Owns the backend, the client's owner id, the table of holds (reentrancy is
// counted here, per lock name and thread, across all Mutex objects) and the
// lease keeper. Destroyed when the last Client/Mutex handle goes: the keeper
// stops, and locks still held are released.
#pragma once

#include <dlock/hold.h>

#include "core/async_acquirer.h"
#include "core/driver.h"
#include "core/held_lock.h"
#include "core/lease_keeper.h"
#include "core/semaphore_driver.h"

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

namespace dlock::detail {

class ClientState : public std::enable_shared_from_this<ClientState> {
 public:
  ClientState(std::unique_ptr<Backend> backend, std::string client_id, std::string url,
              std::string scheme, ClientOptions options);
  ~ClientState();
  ClientState(const ClientState&) = delete;
  ClientState& operator=(const ClientState&) = delete;

  // true: the calling thread now holds `name` as `kind` (new grant or one more hold).
  // `data` is stored with the store's entry for the hold (LockRequest::data).
  Result<bool> acquire(const std::string& name, LockKind kind, const MutexOptions& options,
                       steady::time_point deadline, std::string data = {});
  // wait = false: Mutex::unlock() — the store's answer is not waited for
  // (LockDriver::release_async); it is counted and logged when it comes.
  Status release(const std::string& name, LockKind kind, bool wait = true) noexcept;
  // The calling thread's hold of `name` as `kind`, or nullptr.
  std::shared_ptr<HeldLock> find(const std::string& name, LockKind kind) const;
  Status force_release(const std::string& name);

  // Acquires `request` (its owner is set here: one of its own, see
  // dlock/hold.h) by `deadline` on the async thread, made on the first
  // call; `done` gets the dlock::Hold, once (see AsyncCallback). Throws
  // invalid_argument for an empty `done`.
  void acquire_async(LockRequest request, const MutexOptions& options, steady::time_point deadline,
                     std::stop_token stop, AsyncCallback done);

  // One grant for `request` by `deadline` through the one acquire loop
  // (nullopt: not by the deadline); a grant whose answer came after its
  // lease ran out is given back and tried again.
  Result<std::optional<Grant>> take(const LockRequest& request, steady::time_point deadline);
  // A hold that belongs to a handle rather than to a thread (a Semaphore
  // permit, a barrier member): not counted for reentrancy, kept alive by the
  // lease keeper (per `options`) until let_go().
  std::shared_ptr<HeldLock> keep(LockRequest request, Grant grant, const MutexOptions& options);
  // Stops renewing `hold` and, if `release`, releases it in the store.
  // lock_lost if its lease had been lost before (the store's own error, if
  // any, in the message).
  Status let_go(HeldLock& hold, bool release, bool wait = true) noexcept;

  // The backend's semaphores, or (Backend::supports_permits) core's, made of
  // permits; nullptr if it has neither.
  SemaphoreDriver* semaphores();

  Backend& backend() { return *backend_; }
  const ClientOptions& options() const { return options_; }
  const std::string& url() const { return url_; }
  const std::string& scheme() const { return scheme_; }
  // The owner of an entry the calling thread makes in the store (LockRequest::owner).
  std::string owner_for_this_thread() const;
  ClientStats stats() const;

 private:
  // (lock name, kind, thread ordinal): ordinals are never reused, unlike
  // std::thread::id, so a new thread can never inherit a hold left by one that ended.
  using Key = std::tuple<std::string, LockKind, std::uint64_t>;

  void account_release(const Status& s, LockKind kind, const std::string& name) noexcept;
  // ClientStats::acquire_latency: one acquisition asked for at `start`, granted now.
  void record_latency(steady::time_point start) noexcept;

  std::unique_ptr<Backend> backend_;
  std::string client_id_;
  std::string url_;
  std::string scheme_;
  ClientOptions options_;
  mutable std::mutex mu_;
  std::map<Key, std::shared_ptr<HeldLock>> holds_;  // guarded by mu_
  std::atomic<std::uint64_t> acquisitions_{0};
  std::atomic<std::uint64_t> releases_{0};
  std::atomic<std::uint64_t> failed_releases_{0};
  std::atomic<std::uint64_t> leases_lost_{0};
  std::atomic<std::uint64_t> wakeups_{0};
  std::atomic<std::uint64_t> waits_{0};
  // ClientStats::acquire_latency: counts per bucket, and the sum in ns.
  std::array<std::atomic<std::uint64_t>, LatencyHistogram::bounds.size() + 1> latency_counts_{};
  std::atomic<std::uint64_t> latency_sum_ns_{0};
  std::unique_ptr<LeaseKeeper> keeper_;
  std::unique_ptr<SemaphoreDriver> permits_;  // Backend::supports_permits only
  std::once_flag async_started_;
  std::unique_ptr<AsyncAcquirer> async_;  // made by the first acquire_async
};

// Builds a Client around an opened backend (used by connect()).
std::shared_ptr<Client> make_client(std::shared_ptr<ClientState> state);

}  // namespace dlock::detail
