#include "backends/zookeeper/barrier.h"

#include "backends/zookeeper/errors.h"
#include "core/owner_id.h"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <vector>

namespace dlock::detail::zookeeper {
namespace {

// Curator's name for the node that says the barrier is open.
constexpr std::string_view ready_node = "ready";
constexpr int persistent = 0;

// The reply to deleting `node`: fine if it is gone, whoever deleted it.
Status removed(Call& call, steady::time_point deadline, std::string_view step, const std::string& node) {
  if (!call.wait_until(deadline)) return no_reply(step);
  if (call.rc == ZOK || call.rc == ZNONODE) return {};
  return to_status(call.rc, step, node);
}

// Whether `child` is a member's node: named by a UUID in java.util.UUID's
// text form (8-4-4-4-12 hex digits). The container also holds `ready` and
// the containers of the barriers named below this one ('a/b' is the child
// 'b' of 'a'), which are not members.
bool is_member_node(std::string_view child) {
  if (child.size() != 36) return false;
  for (std::size_t i = 0; i < child.size(); ++i) {
    const char c = child[i];
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? c != '-' : !std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::vector<std::string> member_nodes(std::vector<std::string> children) {
  std::erase_if(children, [](const std::string& child) { return !is_member_node(child); });
  return children;
}

}  // namespace

Result<std::string> Barriers::join(const std::string& name, std::chrono::milliseconds /*lease: the session is the lease*/,
                                   steady::time_point deadline) {
  const std::string step = "entering barrier '" + name + "'";
  // In Curator's layout the barrier 'x/ready' would be barrier 'x''s open flag.
  if (name == ready_node || name.ends_with("/" + std::string(ready_node)))
    return Status(errc::invalid_argument, "barrier '" + name + "': on zk:// a barrier's last name segment cannot be '" +
                                              std::string(ready_node) +
                                              "' (in Curator's layout that node says the barrier above it is open)");
  auto member = random_uuid();
  if (!member) return member;
  const std::string node = lock_path(session_.config(), name) + "/" + *member;
  auto create = session_.create_with_parents(node, ZOO_EPHEMERAL, deadline, step);
  if (!create) return create.status();
  const CallPtr& made = *create;
  // (rc is the completion thread's until the call has answered.)
  const bool answered = made->wait_until(deadline);
  if (!answered || Session::reply_lost(made->rc)) {
    // It may have been made: it must not count as a member.
    session_.delete_later(node);
    return answered && made->rc == ZCONNECTIONLOSS ? to_status(made->rc, step, node) : no_reply(step);
  }
  if (made->rc != ZOK) return to_status(made->rc, step, node);
  return member;
}

Result<BarrierCheck> Barriers::entered(const std::string& name, const std::string& member, int parties, bool watch,
                                       steady::time_point deadline) {
  const std::string step = "waiting to enter barrier '" + name + "'";
  const std::string path = lock_path(session_.config(), name);
  const std::string ready = path + "/" + std::string(ready_node);
  auto signal = watch ? std::make_shared<Signal>() : nullptr;
  // Registered before the reads, so a session change during them is not missed.
  auto waiter = watch ? std::make_unique<SessionWaiter>(session_, signal) : nullptr;
  // The watch goes first: a `ready` made after the listing fires it.
  auto opened = watch ? session_.watch_exists(ready, signal, deadline) : session_.exists(ready, deadline);
  auto list = session_.get_children(path, deadline);
  if (!opened->wait_until(deadline)) return no_reply(step);
  if (opened->rc == ZOK) return BarrierCheck{true, nullptr};
  if (opened->rc != ZNONODE) return to_status(opened->rc, step, ready);
  if (!list->wait_until(deadline)) return no_reply(step);
  if (list->rc != ZOK && list->rc != ZNONODE) return to_status(list->rc, step, path);
  if (std::find(list->children.begin(), list->children.end(), ready_node) != list->children.end())
    return BarrierCheck{true, nullptr};
  const auto members = member_nodes(std::move(list->children));
  if (std::find(members.begin(), members.end(), member) == members.end())
    return Status(errc::lock_lost, "barrier '" + name +
                                       "': our member node is gone (the session expired while it waited to "
                                       "enter); this member is out: arrive again");
  if (members.size() < static_cast<std::size_t>(parties)) return BarrierCheck{false, std::move(waiter)};
  // Enough are in: open it for everyone (whoever made it first, it is open).
  auto made = session_.create(ready, persistent, deadline);
  if (!made->wait_until(deadline)) return no_reply(step);
  if (made->rc != ZOK && made->rc != ZNODEEXISTS) return to_status(made->rc, step, ready);
  return BarrierCheck{true, nullptr};
}

Result<BarrierCheck> Barriers::left(const std::string& name, const std::string& member, bool watch,
                                    steady::time_point deadline) {
  const std::string step = "leaving barrier '" + name + "'";
  const std::string path = lock_path(session_.config(), name);
  while (steady::now() < deadline) {
    auto list = session_.get_children(path, deadline);
    if (!list->wait_until(deadline)) return no_reply(step);
    if (list->rc != ZOK && list->rc != ZNONODE) return to_status(list->rc, step, path);
    auto members = member_nodes(std::move(list->children));
    std::sort(members.begin(), members.end());
    const bool ours_in = std::binary_search(members.begin(), members.end(), member);
    if (members.empty() || (members.size() == 1 && ours_in)) {
      // Every other member has left: ours goes, and the barrier is shut
      // for the next round.
      const std::string ready = path + "/" + std::string(ready_node);
      auto ours = ours_in ? session_.remove(path + "/" + member, deadline) : nullptr;
      auto shut = session_.remove(ready, deadline);
      if (ours) {
        if (Status s = removed(*ours, deadline, step, path + "/" + member); !s) return s;
      }
      if (Status s = removed(*shut, deadline, step, ready); !s) return s;
      return BarrierCheck{true, nullptr};
    }
    // The lowest stays until the highest has gone; the others go now and
    // wait for the lowest, which goes last.
    const bool lowest = members.front() == member;
    const std::string watched = path + "/" + (lowest ? members.back() : members.front());
    auto signal = watch ? std::make_shared<Signal>() : nullptr;
    auto waiter = watch ? std::make_unique<SessionWaiter>(session_, signal) : nullptr;
    auto read = watch ? session_.watch(watched, signal, deadline) : session_.exists(watched, deadline);
    auto ours = ours_in && !lowest ? session_.remove(path + "/" + member, deadline) : nullptr;
    if (!read->wait_until(deadline)) return no_reply(step);
    if (ours) {
      if (Status s = removed(*ours, deadline, step, path + "/" + member); !s) return s;
    }
    if (read->rc == ZNONODE) continue;  // it went meanwhile: look again
    if (read->rc != ZOK) return to_status(read->rc, step, watched);
    return BarrierCheck{false, std::move(waiter)};
  }
  return no_reply(step);
}

void Barriers::remove(const std::string& name, const std::string& member, steady::time_point deadline) noexcept {
  session_.discard(lock_path(session_.config(), name) + "/" + member, deadline);
}

}  // namespace dlock::detail::zookeeper
