#include "backends/zookeeper/semaphore.h"

#include "backends/zookeeper/errors.h"
#include "core/acquire.h"
#include "core/notified_wait.h"

#include <algorithm>
#include <atomic>
#include <tuple>

namespace dlock::detail::zookeeper {
namespace {

struct LeaseGrant final : GrantState {
  std::string node;
};

std::string basename(const std::string& path) { return path.substr(path.rfind('/') + 1); }

}  // namespace

Result<std::optional<Permit>> Semaphores::acquire(const std::string& name, std::int32_t permits,
                                                  const std::string& owner, const MutexOptions& /*options*/,
                                                  steady::time_point deadline) {
  // The session is the lease of the mutex too: no renewal, no lease end.
  const LockRequest mutex{name + "/locks", owner, std::chrono::hours(24), LeaseMode::watchdog};
  ClientOptions options;
  options.op_timeout = session_.config().op_timeout;
  std::atomic<std::uint64_t> wakeups{0};
  for (;;) {
    auto held = detail::acquire(locks_, mutex, deadline, options, wakeups);
    if (!held) return held.status();
    if (!*held) return std::optional<Permit>();
    auto permit = take_lease(name, permits, deadline, (*held)->dropped);
    // Given up or ours, the permit no longer needs the mutex. If it could not
    // be released now the session deletes it later; the permit stands.
    (void)locks_.release(mutex, **held);
    // Our lease node went with an expired session while we waited, or we
    // gave it up with the mutex: queue again, as long as the caller still
    // waits.
    if (!permit && permit.code() == errc::lock_lost) {
      if (steady::now() < deadline) continue;
      return std::optional<Permit>();
    }
    return permit;
  }
}

Result<std::optional<Permit>> Semaphores::take_lease(const std::string& name, std::int32_t permits,
                                                     steady::time_point deadline, const std::stop_token& mutex_dropped) {
  const std::string step = "acquiring a permit of semaphore '" + name + "'";
  const std::string leases = lock_path(session_.config(), name) + "/leases";
  auto prefix = protected_prefix("lease-");
  if (!prefix) return prefix.status();
  auto op_deadline = [&] { return steady::now() + session_.config().op_timeout; };

  std::string node;
  std::uint64_t token = 0;
  while (node.empty()) {
    const auto until = op_deadline();
    auto create = session_.create_with_parents(leases + "/" + *prefix, ZOO_EPHEMERAL_SEQUENTIAL, until, step);
    if (!create) return create.status();
    const CallPtr& made = *create;
    if (!made->wait_until(until)) return session_.forget_create(leases, *prefix, step);
    if (Session::reply_lost(made->rc)) {
      // It may have been made: find it rather than count twice.
      auto found = session_.find_created(leases, *prefix, made->generation, until, step);
      if (!found) return found.status();
      if (*found) std::tie(node, token) = std::tie((*found)->node, (*found)->czxid);
      continue;  // found, or not made: make it (the same prefix)
    }
    if (made->rc != ZOK) return to_status(made->rc, step, leases);
    node = made->path;
    token = static_cast<std::uint64_t>(made->stat.czxid);
  }
  // Leaves without the permit: our node goes now, or when the ensemble answers.
  auto give_up = [&](Status why) -> Result<std::optional<Permit>> {
    session_.discard(node, op_deadline());
    if (!why) return why;
    return std::optional<Permit>();
  };

  auto signal = std::make_shared<Signal>();
  SessionWaiter waiter(session_, signal);  // a session change wakes us too
  for (;;) {
    // The mutex went with a dropped connection (lost_on=suspend): another
    // waiter may hold it and a lease node of its own by now, and two
    // waiting leases would keep each other out for good. Ours goes; the
    // caller queues again.
    if (mutex_dropped.stop_requested()) {
      session_.unwatch(signal);
      (void)give_up({});
      return Status(errc::lock_lost, step + ": the connection dropped while we waited (queued again)");
    }
    const auto until = op_deadline();
    auto list = session_.watch_children(leases, signal, until);
    if (!list->wait_until(until)) return give_up(no_reply(step));
    if (session_.reconnected_after(list->rc, until)) {  // the reply went with the connection: again
      if (steady::now() < deadline) continue;
      session_.unwatch(signal);
      return give_up({});
    }
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
    signal->wait_until(std::min(deadline, now + reread_interval));  // a watch is a hint
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
