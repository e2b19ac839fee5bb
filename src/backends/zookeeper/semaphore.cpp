#include "backends/zookeeper/semaphore.h"

#include "backends/zookeeper/errors.h"
#include "core/acquire.h"

#include <algorithm>
#include <atomic>

namespace dlock::detail::zookeeper {
namespace {

// A watch is a hint: the leases are counted again at least this often.
constexpr std::chrono::milliseconds recount_interval{500};

struct LeaseGrant final : GrantState {
  std::string node;
};

std::string basename(const std::string& path) { return path.substr(path.rfind('/') + 1); }

}  // namespace

Result<std::optional<Permit>> Semaphores::acquire(const std::string& name, std::int32_t permits,
                                                  const std::string& owner, steady::time_point deadline) {
  // The session is the lease of the mutex too: no renewal, no lease end.
  const LockRequest mutex{name + "/locks", owner, std::chrono::hours(24), LeaseMode::watchdog};
  ClientOptions options;
  options.op_timeout = session_.config().op_timeout;
  std::atomic<std::uint64_t> wakeups{0};
  for (;;) {
    auto held = detail::acquire(locks_, mutex, deadline, options, wakeups);
    if (!held) return held.status();
    if (!*held) return std::optional<Permit>();
    auto permit = take_lease(name, permits, deadline);
    // Given up or ours, the permit no longer needs the mutex. If it could not
    // be released now the session deletes it later; the permit stands.
    (void)locks_.release(mutex, **held);
    // Our lease node went with an expired session while we waited: queue
    // again in the new one, as long as the caller still waits.
    if (!permit && permit.code() == errc::lock_lost) {
      if (steady::now() < deadline) continue;
      return std::optional<Permit>();
    }
    return permit;
  }
}

Result<std::optional<Permit>> Semaphores::take_lease(const std::string& name, std::int32_t permits,
                                                     steady::time_point deadline) {
  const std::string step = "acquiring a permit of semaphore '" + name + "'";
  const std::string leases = lock_path(session_.config(), name) + "/leases";
  auto prefix = protected_prefix("lease-");
  if (!prefix) return prefix.status();
  auto op_deadline = [&] { return steady::now() + session_.config().op_timeout; };

  CallPtr create;
  for (int attempt = 0;; ++attempt) {
    const auto until = op_deadline();
    create = session_.create(leases + "/" + *prefix, ZOO_EPHEMERAL_SEQUENTIAL, until);
    if (!create->wait_until(until) || create->rc == ZCONNECTIONLOSS || create->rc == ZOPERATIONTIMEOUT) {
      // It may have been made: never leave it to count against everyone.
      session_.delete_later_by_marker(leases, *prefix);
      return create->rc == ZCONNECTIONLOSS ? to_status(create->rc, step, leases) : no_reply(step);
    }
    if (create->rc == ZNONODE && attempt == 0) {
      if (Status s = session_.create_parents(leases + "/" + *prefix, until, step); !s) return s;
      continue;
    }
    if (create->rc != ZOK) return to_status(create->rc, step, leases);
    break;
  }
  const std::string node = create->path;
  const std::uint64_t token = static_cast<std::uint64_t>(create->stat.czxid);
  // Leaves without the permit: our node goes now, or when the ensemble answers.
  auto give_up = [&](Status why) -> Result<std::optional<Permit>> {
    const auto until = op_deadline();
    auto removal = session_.remove(node, until);
    if (!removal->wait_until(until) || (removal->rc != ZOK && removal->rc != ZNONODE)) session_.delete_later(node);
    if (!why) return why;
    return std::optional<Permit>();
  };

  auto signal = std::make_shared<Signal>();
  SessionWaiter waiter(session_, signal);  // a session change wakes us too
  for (;;) {
    const auto until = op_deadline();
    auto list = session_.watch_children(leases, signal, until);
    if (!list->wait_until(until)) return give_up(no_reply(step));
    if (list->rc != ZOK && list->rc != ZNONODE) return give_up(to_status(list->rc, step, leases));
    const auto& children = list->children;
    if (std::find(children.begin(), children.end(), basename(node)) == children.end())
      return Status(errc::lock_lost, step + ": our lease node vanished while we waited (the session expired)");
    if (children.size() <= static_cast<std::size_t>(permits)) {
      Permit out;
      out.token = token;
      out.dropped = session_.hold(node, steady::time_point::max());
      auto state = std::make_unique<LeaseGrant>();
      state->node = node;
      out.state = std::move(state);
      session_.unwatch(signal);
      return std::optional<Permit>(std::move(out));
    }
    const auto now = steady::now();
    if (now >= deadline) {
      session_.unwatch(signal);
      return give_up({});
    }
    signal->wait_until(std::min(deadline, now + recount_interval));
  }
}

Status Semaphores::release(const std::string& name, Permit& permit) {
  return session_.give_back(static_cast<LeaseGrant&>(*permit.state).node,
                            "release of semaphore '" + name + "'");
}

Result<std::int64_t> Semaphores::in_use(const std::string& name) {
  const std::string step = "counting the permits of semaphore '" + name + "'";
  const std::string leases = lock_path(session_.config(), name) + "/leases";
  const auto deadline = steady::now() + session_.config().op_timeout;
  auto list = session_.get_children(leases, deadline);
  if (!list->wait_until(deadline)) return no_reply(step);
  if (list->rc == ZNONODE) return std::int64_t{0};
  if (list->rc != ZOK) return to_status(list->rc, step, leases);
  return static_cast<std::int64_t>(list->children.size());
}

}  // namespace dlock::detail::zookeeper
