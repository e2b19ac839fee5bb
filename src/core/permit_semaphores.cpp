#include "core/permit_semaphores.h"

#include "core/client_state.h"

#include <atomic>
#include <string>

namespace dlock::detail {
namespace {

// What a permit taken this way keeps: the hold the lease keeper renews.
class LeasedPermit final : public GrantState {
 public:
  explicit LeasedPermit(std::shared_ptr<HeldLock> held) : hold(std::move(held)) {}
  std::shared_ptr<HeldLock> hold;
};

class PermitSemaphores final : public SemaphoreDriver {
 public:
  explicit PermitSemaphores(ClientState& client) : client_(client) {}

  Result<std::optional<Permit>> acquire(const std::string& name, std::int32_t permits, const std::string& owner,
                                        const MutexOptions& options, steady::time_point deadline) override {
    // One handle may hold several permits from one thread: each permit is
    // its own entry in the store, so each gets its own owner.
    LockRequest request = lock_request(name, LockKind::permit, options);
    request.owner = owner + "-p" + std::to_string(next_.fetch_add(1, std::memory_order_relaxed));
    request.permits = permits;
    auto got = client_.take(request, deadline);
    if (!got) return got.status();
    if (!*got) return std::optional<Permit>();
    auto hold = client_.keep(std::move(request), std::move(**got), options);
    Permit permit;
    permit.token = hold->token;
    // A lease the keeper could not keep is a permit dropped.
    permit.dropped = hold->stop.get_token();
    permit.state = std::make_unique<LeasedPermit>(std::move(hold));
    return std::optional<Permit>(std::move(permit));
  }

  Status release(const std::string& name, Permit& permit) override {
    auto* leased = dynamic_cast<LeasedPermit*>(permit.state.get());
    if (!leased || !leased->hold)
      return Status(errc::lock_lost, "release of semaphore '" + name + "': the permit was given back already");
    Status s = client_.let_go(*leased->hold, true);
    leased->hold.reset();
    return s;
  }

  bool lease_over(const Permit& permit) const override {
    auto* leased = dynamic_cast<const LeasedPermit*>(permit.state.get());
    return leased && leased->hold && (leased->hold->lost.load() || leased->hold->past_deadline());
  }

  Result<std::int64_t> in_use(const std::string& name) override {
    auto listed = client_.backend().locks().list(name);
    if (!listed) return listed.status();
    std::int64_t n = 0;
    for (const auto& info : *listed)
      if (info.name == name && info.kind == "permit") ++n;
    return n;
  }

 private:
  ClientState& client_;
  std::atomic<std::uint64_t> next_{0};
};

}  // namespace

std::unique_ptr<SemaphoreDriver> make_permit_semaphores(ClientState& client) {
  return std::make_unique<PermitSemaphores>(client);
}

}  // namespace dlock::detail
