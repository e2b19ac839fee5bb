#include <dlock/barrier.h>

#include "core/barrier_driver.h"
#include "core/client_state.h"
#include "core/notified_wait.h"

#include <mutex>
#include <string>
#include <utility>

namespace dlock {
namespace {

using detail::steady;

detail::BarrierDriver& driver(detail::ClientState& client) {
  // Client::barrier() handed this handle out only if the backend has barriers.
  return *client.backend().barriers();
}

steady::time_point op_deadline(const detail::ClientState& client) {
  return steady::now() + client.options().op_timeout;
}

}  // namespace

// Where this member is. Calls check and move `stage` under `mu` and do
// their remote steps outside it; `entering` and `leaving` keep a second
// call out while one is under way.
struct Barrier::Member {
  enum class Stage { out, entering, in, leaving };
  mutable std::mutex mu;
  Stage stage = Stage::out;
  std::string id;  // the driver's member id; set while entering and in
  // The entry's lease, kept by the lease keeper (BarrierDriver::leased_members).
  std::shared_ptr<detail::HeldLock> lease;

  // Marks the member out, and (if `remove`) removes its entry from the
  // store: the one way out of every call that does not end in the barrier.
  void take_out(detail::ClientState& client, const std::string& name, bool remove) noexcept {
    std::string entry;
    std::shared_ptr<detail::HeldLock> leased;
    {
      std::lock_guard lk(mu);
      entry = std::exchange(id, {});
      leased = std::move(lease);
      stage = Stage::out;
    }
    if (leased) (void)client.let_go(*leased, false);  // no renewal from here on; remove() below takes it out
    if (remove && !entry.empty()) driver(client).remove(name, entry, op_deadline(client));
  }
};

namespace {

// Runs `f` on the way out of a scope unless dismissed.
template <class F>
class OnExit {
 public:
  explicit OnExit(F f) : f_(std::move(f)) {}
  OnExit(const OnExit&) = delete;
  OnExit& operator=(const OnExit&) = delete;
  ~OnExit() {
    if (armed_) f_();
  }
  void dismiss() { armed_ = false; }

 private:
  F f_;
  bool armed_ = true;
};

}  // namespace

Barrier::Barrier(std::shared_ptr<detail::ClientState> client, std::string name, int parties, MutexOptions options)
    : client_(std::move(client)),
      name_(std::move(name)),
      parties_(parties),
      options_(options),
      member_(std::make_unique<Member>()) {}

Barrier::Barrier(Barrier&&) noexcept = default;

Barrier& Barrier::operator=(Barrier&& other) noexcept {
  if (this != &other) {
    abandon();
    client_ = std::move(other.client_);
    name_ = std::move(other.name_);
    parties_ = other.parties_;
    options_ = other.options_;
    member_ = std::move(other.member_);
  }
  return *this;
}

Barrier::~Barrier() { abandon(); }

void Barrier::abandon() noexcept {
  if (!member_ || !client_) return;  // moved from
  {
    std::lock_guard lk(member_->mu);
    if (member_->stage != Member::Stage::in) return;
  }
  member_->take_out(*client_, name_, true);
}

bool Barrier::entered() const {
  std::lock_guard lk(member_->mu);
  return member_->stage == Member::Stage::in;
}

void Barrier::arrive_and_wait() { (void)enter_until_steady(steady::time_point::max()); }

void Barrier::leave() { (void)leave_until_steady(steady::time_point::max()); }

bool Barrier::enter_until_steady(steady::time_point deadline) {
  Member& m = *member_;
  {
    std::lock_guard lk(m.mu);
    if (m.stage != Member::Stage::out)
      throw Error(errc::invalid_argument,
                  "arrive_and_wait on barrier '" + name_ + "': " +
                      (m.stage == Member::Stage::in
                           ? "this handle is already in the barrier (a handle is one member: leave() first, or "
                             "make another handle for another member)"
                           : "another call on this handle is under way (a handle is one member: one call at a time)"));
    m.stage = Member::Stage::entering;
  }
  // Every way out but into the barrier takes the entry away again (a
  // vanished entry needs no removal).
  bool entry_left = true;
  OnExit take_out([&] { m.take_out(*client_, name_, entry_left); });
  const auto sent = steady::now();
  std::string id = driver(*client_).join(name_, options_.lease, op_deadline(*client_)).value();
  std::shared_ptr<detail::HeldLock> lease;
  if (driver(*client_).leased_members()) {
    // The entry lives `lease` from when join was sent, unless renewed.
    detail::LockRequest request{name_, id, options_.lease, options_.lease_mode, false, detail::LockKind::member};
    detail::Grant grant;
    grant.valid_until = sent + options_.lease;
    lease = client_->keep(std::move(request), std::move(grant), options_);
  }
  {
    std::lock_guard lk(m.mu);
    m.id = id;
    m.lease = std::move(lease);
  }
  bool in;
  try {
    in = detail::wait_until_done(deadline, [&](bool watch) {
      return driver(*client_).entered(name_, id, parties_, watch, op_deadline(*client_)).value();
    });
  } catch (const Error& e) {
    if (e.kind() == errc::lock_lost) entry_left = false;
    throw;
  }
  if (!in) return false;
  take_out.dismiss();
  std::lock_guard lk(m.mu);
  m.stage = Member::Stage::in;
  return true;
}

bool Barrier::leave_until_steady(steady::time_point deadline) {
  Member& m = *member_;
  std::string id;
  {
    std::lock_guard lk(m.mu);
    if (m.stage == Member::Stage::out)
      throw Error(errc::not_owner, "leave on barrier '" + name_ +
                                       "': this handle is not in the barrier (leave() follows an arrive_and_wait() "
                                       "that returned, or an arrive_and_wait_for() that returned true)");
    if (m.stage != Member::Stage::in)
      throw Error(errc::invalid_argument, "leave on barrier '" + name_ +
                                              "': another call on this handle is under way (a handle is one "
                                              "member: one call at a time)");
    m.stage = Member::Stage::leaving;
    id = m.id;
  }
  // Whatever the outcome, the member is out afterwards; its entry is gone
  // already if every member left.
  bool entry_left = true;
  OnExit take_out([&] { m.take_out(*client_, name_, entry_left); });
  entry_left = !detail::wait_until_done(deadline, [&](bool watch) {
    return driver(*client_).left(name_, id, watch, op_deadline(*client_)).value();
  });
  return !entry_left;
}

}  // namespace dlock
