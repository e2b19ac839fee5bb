// held_grants.h — the holds this client has on the store, for re-validating
// them after a failover (redis+sentinel): each grant carries a GrantState
// that keeps it listed while the grant lives, and a stop_token (Grant::
// dropped) that tells core at once when the new master does not have it.
#pragma once

#include "core/driver.h"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <vector>

namespace dlock::detail::redis {

class HeldGrants : public std::enable_shared_from_this<HeldGrants> {
 public:
  struct Held {
    LockKind kind;
    std::string name, owner;
    std::uint64_t token;
  };

  // Lists `grant` (of `request`) until it is destroyed.
  void add(const LockRequest& request, Grant& grant) {
    auto listed = std::make_unique<Listed>();
    listed->grants = shared_from_this();
    std::lock_guard lk(mu_);
    listed->id = next_id_++;
    Entry& e = entries_[listed->id];
    e.held = Held{request.kind, request.name, request.owner, grant.token};
    grant.dropped = e.stop.get_token();
    grant.state = std::move(listed);
  }

  // Every hold listed now, with its id.
  std::vector<std::pair<std::uint64_t, Held>> snapshot() const {
    std::lock_guard lk(mu_);
    std::vector<std::pair<std::uint64_t, Held>> out;
    out.reserve(entries_.size());
    for (const auto& [id, e] : entries_) out.emplace_back(id, e.held);
    return out;
  }

  // The store does not have hold `id` any more: its holder is told now.
  void drop(std::uint64_t id) {
    std::stop_source stop;
    {
      std::lock_guard lk(mu_);
      auto it = entries_.find(id);
      if (it == entries_.end()) return;
      stop = it->second.stop;
      entries_.erase(it);
    }
    stop.request_stop();  // runs core's callback: not under mu_
  }

 private:
  struct Entry {
    Held held;
    std::stop_source stop;
  };
  struct Listed final : GrantState {
    std::shared_ptr<HeldGrants> grants;
    std::uint64_t id = 0;
    ~Listed() override {
      std::lock_guard lk(grants->mu_);
      grants->entries_.erase(id);
    }
  };

  mutable std::mutex mu_;
  std::map<std::uint64_t, Entry> entries_;  // mu_
  std::uint64_t next_id_ = 1;               // mu_
};

}  // namespace dlock::detail::redis
