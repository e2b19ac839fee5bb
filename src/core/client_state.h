// client_state.h — what a Client and all its Mutex handles share.
//
// Owns the backend, the client's owner id, the table of holds (reentrancy is
// counted here, per lock name and thread, across all Mutex objects) and the
// lease keeper. Destroyed when the last Client/Mutex handle goes: the keeper
// stops, and locks still held are released.
#pragma once

#include "core/driver.h"
#include "core/hold.h"
#include "core/lease_keeper.h"

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

class ClientState {
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
  Status release(const std::string& name, LockKind kind) noexcept;
  // The calling thread's hold of `name` as `kind`, or nullptr.
  std::shared_ptr<Hold> find(const std::string& name, LockKind kind) const;
  Status force_release(const std::string& name);

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

  std::unique_ptr<Backend> backend_;
  std::string client_id_;
  std::string url_;
  std::string scheme_;
  ClientOptions options_;
  mutable std::mutex mu_;
  std::map<Key, std::shared_ptr<Hold>> holds_;  // guarded by mu_
  std::atomic<std::uint64_t> acquisitions_{0};
  std::atomic<std::uint64_t> releases_{0};
  std::atomic<std::uint64_t> failed_releases_{0};
  std::atomic<std::uint64_t> leases_lost_{0};
  std::atomic<std::uint64_t> wakeups_{0};
  std::unique_ptr<LeaseKeeper> keeper_;
};

// Builds a Client around an opened backend (used by connect()).
std::shared_ptr<Client> make_client(std::shared_ptr<ClientState> state);

}  // namespace dlock::detail
