// The zk:// backend: Mutex on ZooKeeper, the protocol of Curator's
// InterProcessMutex, so a dlock mutex and a Curator mutex on the same path
// exclude each other and share one queue.
//
//   <root>/<name>                         the lock's node (a container)
//   <root>/<name>/_c_<uuid>-lock-<seq>    one ephemeral sequential node per
//                                         contender; the lowest sequence
//                                         holds the lock
//
// Acquire: create our node, list the children (both sent back to back: one
// round trip when the lock is free). If ours is lowest we hold it; else we
// watch one node before ours (see decide()), so a release wakes the next
// holder and at most one waiter more, never a herd. When the node we watch
// is the last one before ours and it is deleted, we are lowest — sequence
// numbers only grow, nothing can appear before us — so that handoff costs
// the holder's delete and one notification, nothing more. A waiter that
// gives up deletes its node; one that dies loses it with its session. A
// create whose reply is lost with the connection is found again by its
// node's unique prefix, keeping its place, never made twice.
//
// Fencing token: the creation zxid of our node. zxids are issued in the
// order the ensemble applies writes, so a later holder's node (created
// after the earlier holder's, since holders are served in creation order)
// always has a larger one, across leader elections too (the epoch is the
// high half).
//
// Election: Curator's LeaderLatch, the same queue with "-latch-" nodes
// whose data is the participant id; the leader is the lowest node, and
// observers read its data and watch it (while it exists nothing can sort
// before it, so its deletion or a new id is the only change to wait for).
//
// Lease: the session is the lease. A holder that dies or is cut off loses
// its node when the ensemble expires its session; lost_on (config.h) says
// when the holder itself stops trusting it. Watchdog renewals check that
// our node still exists (a force-release deletes it). A fixed lease is
// enforced by this client: at its end the node is deleted.
#include "backends/zookeeper/barrier.h"
#include "backends/zookeeper/config.h"
#include "backends/zookeeper/contenders.h"
#include "backends/zookeeper/counters.h"
#include "backends/zookeeper/semaphore.h"
#include "backends/zookeeper/errors.h"
#include "backends/zookeeper/session.h"
#include "core/pending_replies.h"
#include "core/queue_waiter.h"
#include "core/registry.h"
#include "core/validate.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

namespace dlock::detail {
namespace zookeeper {
namespace {

using std::chrono::milliseconds;

std::string basename(const std::string& path) { return path.substr(path.rfind('/') + 1); }

Result<std::string> node_prefix(LockKind kind) { return protected_prefix(node_name(kind)); }

struct NodeGrant final : GrantState {
  std::string node;
};

// A waiting thread's place in one lock's queue.
struct Contender {
  std::shared_ptr<Signal> signal = std::make_shared<Signal>();
  std::string node;                // our node's full path; empty: none yet
  std::uint64_t generation = 0;    // the session it was made in
  std::uint64_t czxid = 0;
  std::string watched;        // the node we watch (full path)
  bool last_blocker = false;  // it is the only one before ours that blocks us
  std::string then_watch;     // once it is gone, the only one left before ours (empty: list again)
  bool granted = false;
  // When a reply of ours first went with the connection since the last
  // one that came (zero: none did).
  steady::time_point lost_reply_at{};
};

// `config` with the backend's events as where session changes go.
Config reporting_to(Config config, Events& events) {
  config.events = &events;
  return config;
}

class ZooKeeperBackend final : public Backend, public LockDriver {
 public:
  explicit ZooKeeperBackend(Config config) : session_(reporting_to(std::move(config), events())) {}

  Status start() { return session_.start(); }

  Status validate_name(std::string_view name) const override {
    const std::string what = "name '" + std::string(name) + "'";
    for (auto segment : path_segments(name)) {
      if (Status s = check_segment(segment, what); !s) return s;
      if (looks_like_contender(segment))
        return Status(errc::invalid_argument, what + ": segment '" + std::string(segment) +
                                                  "' looks like a lock's contender node (_c_..., -lock-, "
                                                  "-latch-, __READ__, __WRIT__); ZooKeeper recipes would "
                                                  "mistake it");
    }
    if (session_.config().root == "/" && (name == "zookeeper" || name.starts_with("zookeeper/")))
      return Status(errc::invalid_argument, what + ": /zookeeper is ZooKeeper's own subtree");
    return {};
  }

  bool supports_fair() const override { return true; }  // the queue is always FIFO
  bool supports_shared() const override { return true; }
  bool supports_election() const override { return true; }
  LockDriver& locks() override { return *this; }
  bool waits_in_queue() const override { return true; }
  std::optional<milliseconds> session_timeout() const override { return session_.negotiated_timeout(); }
  CounterDriver* counters() override { return &counters_; }
  LatchDriver* latches() override { return &latches_; }
  SemaphoreDriver* semaphores() override { return &semaphores_; }
  BarrierDriver* barriers() override { return &barriers_; }

  Status ping() override {
    const auto deadline = steady::now() + session_.config().op_timeout;
    auto call = session_.exists("/", deadline);
    if (!call->wait_until(deadline)) return no_reply("ping");
    return to_status(call->rc, "ping", "/");
  }

  Result<Attempt> try_acquire(const LockRequest& request) override {
    const auto sent = steady::now();
    const auto deadline = sent + session_.config().op_timeout;
    const std::string step = "acquiring '" + request.name + "'";
    const std::string path = lock_path(session_.config(), request.name);
    auto c = find(request.owner, request.name);  // null: a try_lock that must leave no trace
    const std::uint64_t generation = session_.generation();

    // The node we watch is gone, and we know what that leaves before ours
    // (nothing can have appeared there since: sequence numbers only grow).
    if (c && !c->node.empty() && c->generation == generation && c->signal->take_deleted(c->watched)) {
      if (c->last_blocker) {
        // It was the last one that blocked ours: we hold the lock now, if
        // our node is still there. The event may have been read after a
        // stall (SIGSTOP, an overloaded host) long enough for our session
        // to expire and another contender to take the lock; the client
        // learns that only from the server, so one round trip settles it.
        auto ours = session_.exists(c->node, deadline);
        if (!ours->wait_until(deadline)) return no_reply(step);
        if (ours->rc == ZOK) return grant(request, *c, sent);
        // The session expired (a new one queues anew), or the reply went
        // with the connection: look again once the client is connected.
        if (ours->rc == ZSESSIONEXPIRED) return Attempt(Busy{});
        if (ours->rc != ZNONODE) return look_again_after(ours->rc, *c, step, c->node);
        c->node.clear();  // gone with its session: queue again
      } else if (!c->then_watch.empty()) {
        // It was the first of two: the other is the last one now.
        return watch_blocker(request, *c, std::exchange(c->then_watch, {}), true, {}, sent, deadline, step);
      }
    }

    std::vector<std::string> children;
    if (!c || c->node.empty() || c->generation != generation) {
      auto made = create_node(path, request.kind, request.data, deadline, step);
      if (!made) return made.status();
      if (!c) {
        // try_lock: one look, then gone.
        Contender once;
        once.node = made->node;
        once.czxid = made->czxid;
        once.generation = made->generation;
        return decide(request, once, path, made->children, sent, deadline, step, false);
      }
      c->node = made->node;
      c->czxid = made->czxid;
      c->generation = made->generation;
      children = std::move(made->children);
    } else {
      auto list = session_.get_children(path, deadline);
      if (!list->wait_until(deadline)) return no_reply(step);
      if (list->rc != ZOK && list->rc != ZNONODE) return look_again_after(list->rc, *c, step, path);
      children = std::move(list->children);
    }
    return decide(request, *c, path, children, sent, deadline, step, true);
  }

  std::unique_ptr<Waiter> watch(const LockRequest& request) override {
    auto c = std::make_shared<Contender>();
    std::pair<std::string, std::string> key{request.owner, request.name};
    {
      std::lock_guard lk(mu_);
      contenders_[key] = c;
    }
    session_.add_waiter(c->signal);
    return std::make_unique<QueueWaiter<ZooKeeperBackend, Contender>>(*this, std::move(key), std::move(c));
  }

  // A waiter leaves: its node goes (unless it became the lock).
  void leave(const std::pair<std::string, std::string>& key, Contender& c) {
    {
      std::lock_guard lk(mu_);
      contenders_.erase(key);
    }
    session_.remove_waiter(c.signal);
    if (c.granted || c.node.empty() || c.generation != session_.generation()) return;
    // Gone before the caller returns (as a try_lock_for that timed out
    // must leave no trace); if the ensemble can't say so now, later.
    session_.discard(c.node, steady::now() + session_.config().op_timeout);
  }

  Status release(const LockRequest& request, Grant& grant) override {
    return session_.give_back(static_cast<NodeGrant&>(*grant.state).node, "unlock '" + request.name + "'");
  }

  // Mutex::unlock(): the delete is sent, not waited for (see give_back_async).
  void release_async(const LockRequest& request, Grant& grant, std::function<void(Status)> done) override {
    session_.give_back_async(static_cast<NodeGrant&>(*grant.state).node, "unlock '" + request.name + "'",
                             unanswered_.track(std::move(done)));
  }

  void flush(steady::time_point deadline) override { unanswered_.close(deadline); }

  // One exists() per lock, all in flight at once: one round trip per batch.
  void renew(std::span<Renewal> batch) override {
    const auto sent = steady::now();
    const auto deadline = sent + session_.config().op_timeout;
    std::vector<CallPtr> calls(batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const std::string& node = static_cast<NodeGrant&>(*batch[i].grant->state).node;
      if (session_.holds(node)) calls[i] = session_.exists(node, deadline);
    }
    const std::int64_t session_id = session_.session_id();
    for (std::size_t i = 0; i < batch.size(); ++i) {
      Renewal& r = batch[i];
      const std::string& node = static_cast<NodeGrant&>(*r.grant->state).node;
      const std::string step = "renewing '" + r.request->name + "'";
      if (!calls[i]) {
        r.outcome = Status(errc::lock_lost, step + ": the session was suspended or expired (lost_on policy)");
      } else if (!calls[i]->wait_until(deadline)) {
        r.outcome = no_reply(step);
      } else if (calls[i]->rc == ZOK && calls[i]->stat.ephemeralOwner == session_id) {
        r.grant->valid_until = sent + r.request->lease;
        r.outcome = {};
      } else if (calls[i]->rc == ZOK || calls[i]->rc == ZNONODE) {
        r.outcome = Status(errc::lock_lost, step + ": our node is gone (force-released, or the session expired)");
      } else {
        r.outcome = to_status(calls[i]->rc, step, node);
      }
    }
  }

  // Deletes the holder's node (the lowest); waiters keep their places.
  Status force_release(std::string_view name) override {
    const auto deadline = steady::now() + session_.config().op_timeout;
    const std::string step = "force-releasing '" + std::string(name) + "'";
    const std::string path = lock_path(session_.config(), name);
    auto list = session_.get_children(path, deadline);
    if (!list->wait_until(deadline)) return no_reply(step);
    if (list->rc == ZNONODE) return {};
    if (list->rc != ZOK) return to_status(list->rc, step, path);
    auto queue = contenders(std::move(list->children), LockKind::mutex);
    if (queue.empty()) return {};
    auto removal = session_.remove(path + "/" + queue.front(), deadline);
    if (!removal->wait_until(deadline)) return no_reply(step);
    if (removal->rc == ZNONODE) return {};
    return to_status(removal->rc, step, path);
  }

  // The lowest contender's data: list, then read (and watch) it; if it
  // went in between, look again.
  Result<Holder> holder(std::string_view name, LockKind kind, bool watch) override {
    const auto deadline = steady::now() + session_.config().op_timeout;
    const std::string step = "reading the leader of '" + std::string(name) + "'";
    const std::string path = lock_path(session_.config(), name);
    for (;;) {
      auto list = session_.get_children(path, deadline);
      if (!list->wait_until(deadline)) return no_reply(step);
      if (list->rc == ZNONODE) return Holder{};
      if (list->rc != ZOK) return to_status(list->rc, step, path);
      const auto queue = contenders(std::move(list->children), kind);
      if (queue.empty()) return Holder{};
      const std::string head = path + "/" + queue.front();
      auto signal = watch ? std::make_shared<Signal>() : nullptr;
      auto read = watch ? session_.watch(head, signal, deadline) : session_.get(head, deadline);
      const bool answered = read->wait_until(deadline);
      if (signal && (!answered || read->rc != ZOK)) session_.unwatch(signal);
      if (!answered) return no_reply(step);
      if (read->rc == ZNONODE) continue;  // it went meanwhile: the next one leads
      if (read->rc != ZOK) return to_status(read->rc, step, head);
      Holder out{std::move(read->data), nullptr};
      if (signal) out.change = std::make_unique<SessionWaiter>(session_, std::move(signal));
      return out;
    }
  }

  // Walks the tree under the root, one level per round trip.
  // Walks the tree under the root, one level per round trip, and reports
  // the holders of every recipe it recognises: a mutex's lowest node, a
  // read-write lock's writer or readers, an election's leader, and a
  // semaphore's leases.
  Result<std::vector<LockInfo>> list(std::string_view prefix) override {
    const auto deadline = steady::now() + session_.config().op_timeout;
    constexpr std::string_view step = "listing locks";
    const std::string& root = session_.config().root;
    const std::string base = root == "/" ? "" : root;
    std::vector<std::string> level{""};  // names relative to the root
    struct Held {
      std::string name, node, kind;
    };
    std::vector<Held> held;
    constexpr std::size_t max_nodes = 100'000;
    std::size_t visited = 0;
    while (!level.empty()) {
      std::vector<CallPtr> calls;
      for (const auto& name : level) calls.push_back(session_.get_children(name.empty() ? root : base + "/" + name, deadline));
      std::vector<std::string> next;
      for (std::size_t i = 0; i < level.size(); ++i) {
        if (!calls[i]->wait_until(deadline)) return no_reply(step);
        if (calls[i]->rc == ZNONODE) continue;
        if (calls[i]->rc != ZOK) return to_status(calls[i]->rc, step, base + "/" + level[i]);
        visited += calls[i]->children.size();
        if (visited > max_nodes)
          return Status(errc::unsupported, "listing locks: more than 100,000 nodes under " + root);
        const std::string& name = level[i];
        const std::string path = base + "/" + name + "/";
        if (!name.empty() && name.starts_with(prefix)) {
          for (const auto& h : holders(calls[i]->children)) held.push_back({name, path + h.first, h.second});
        }
        // A semaphore's leases: <name>/leases/_c_…-lease-…, one per permit out.
        const auto leases_at = name.size() >= 7 ? name.size() - 7 : std::string::npos;
        if (leases_at != std::string::npos && name.compare(leases_at, 7, "/leases") == 0 &&
            name.substr(0, leases_at).starts_with(prefix)) {
          for (const auto& child : calls[i]->children)
            if (child.find(lease_marker) != std::string::npos) held.push_back({name.substr(0, leases_at), path + child, "permit"});
        }
        for (const auto& child : calls[i]->children) {
          if (is_contender(child, LockKind::mutex) || is_contender(child, LockKind::read) ||
              is_contender(child, LockKind::leader) || child.find(lease_marker) != std::string::npos)
            continue;
          std::string below = name.empty() ? child : name + "/" + child;
          // Only subtrees that can hold a name with this prefix (a
          // semaphore's leases are listed under its name).
          if (below.starts_with(prefix) || std::string_view(prefix).starts_with(below + "/") ||
              (child == "leases" && name.starts_with(prefix)))
            next.push_back(std::move(below));
        }
      }
      level = std::move(next);
    }
    // An election's leader is known by its id (the node's data).
    std::vector<CallPtr> reads;
    for (const auto& h : held)
      reads.push_back(h.kind == "leader" ? session_.get(h.node, deadline) : session_.exists(h.node, deadline));
    std::vector<LockInfo> out;
    for (std::size_t i = 0; i < held.size(); ++i) {
      if (!reads[i]->wait_until(deadline)) return no_reply(step);
      if (reads[i]->rc != ZOK) continue;  // released meanwhile
      char owner[32];
      std::snprintf(owner, sizeof owner, "0x%llx", static_cast<unsigned long long>(reads[i]->stat.ephemeralOwner));
      std::string holder = std::string("session ") + owner;
      if (held[i].kind == "leader" && !reads[i]->data.empty()) holder = "'" + reads[i]->data + "', " + holder;
      out.push_back(LockInfo{held[i].name, std::move(holder), static_cast<std::uint64_t>(reads[i]->stat.czxid),
                             std::nullopt, held[i].kind});
    }
    std::sort(out.begin(), out.end(), [](const LockInfo& a, const LockInfo& b) {
      return std::tie(a.name, a.kind, a.token) < std::tie(b.name, b.kind, b.token);
    });
    return out;
  }

 private:
  using Made = Session::Created;

  std::shared_ptr<Contender> find(const std::string& owner, const std::string& name) {
    std::lock_guard lk(mu_);
    auto it = contenders_.find({owner, name});
    return it == contenders_.end() ? nullptr : it->second;
  }

  // Creates our node and lists the lock's children, sent back to back (the
  // ensemble answers a session's requests in order, so the list has it).
  Result<Made> create_node(const std::string& path, LockKind kind, std::string_view data,
                           steady::time_point deadline, const std::string& step) {
    auto prefix = node_prefix(kind);
    if (!prefix) return prefix.status();
    bool made_parents = false;
    for (;;) {
      auto create = session_.create(path + "/" + *prefix, ZOO_EPHEMERAL_SEQUENTIAL, deadline, data);
      auto list = session_.get_children(path, deadline);
      if (!create->wait_until(deadline)) return session_.forget_create(path, *prefix, step);
      if (Session::reply_lost(create->rc)) {
        // It may have been made: find it rather than make a second one.
        auto found = session_.find_created(path, *prefix, create->generation, deadline, step);
        if (!found) return found.status();
        if (*found) return std::move(**found);
        continue;  // it was not made, or died with its session: make it (the same prefix)
      }
      if (create->rc == ZNONODE && !made_parents) {
        // The lock's node (or an ancestor) doesn't exist yet, or an empty
        // container was just reaped: make them, then once more.
        if (Status s = session_.create_parents(path + "/" + *prefix, deadline, step); !s) return s;
        made_parents = true;
        continue;
      }
      if (create->rc != ZOK) return to_status(create->rc, step, path);
      Made made{create->path, static_cast<std::uint64_t>(create->stat.czxid), create->generation, {}};
      if (!list->wait_until(deadline) || list->rc != ZOK) {
        // Ours exists but its place is unknown: look again (once the client
        // is connected again, if the reply went with the connection).
        for (;;) {
          list = session_.get_children(path, deadline);
          const bool answered = list->wait_until(deadline);
          if (answered && list->rc == ZOK) break;
          if (answered && session_.reconnected_after(list->rc, deadline)) continue;
          session_.delete_later(made.node);
          return answered ? to_status(list->rc, step, path) : no_reply(step);
        }
      }
      made.children = std::move(list->children);
      return made;
    }
  }

  // Our node's place in the queue. A mutex or a writer holds the lock when
  // its node is lowest; a reader when no writer's node is before its own,
  // and else it watches the first such writer (Curator's read-write lock
  // rules). A try_lock that doesn't hold it leaves.
  //
  // A mutex or a writer with one node before its own watches it: that
  // node's deletion alone grants the lock. With two, it watches the first,
  // then the second once the first is gone — the second is then the only
  // one left, so the handoff to us is again one deletion and one
  // notification, with no listing between the release and the grant. With
  // more, it watches the one two before its own and lists again when that
  // goes, while the one just before its own is the next holder at best.
  // Each waiter has one watch at a time, and a node has at most two
  // watchers (the two after it), however long the queue.
  Result<Attempt> decide(const LockRequest& request, Contender& c, const std::string& path,
                         std::vector<std::string> children, steady::time_point sent, steady::time_point deadline,
                         const std::string& step, bool waiting) {
    const auto queue = contenders(std::move(children), request.kind);
    const QueuePlace place = place_in_queue(queue, basename(c.node), request.kind);
    if (place.ours && !place.blocker) {
      auto granted = grant(request, c, sent);
      if (!waiting && std::holds_alternative<Busy>(granted)) session_.discard(c.node, deadline);  // read too late
      return granted;
    }
    if (!waiting) {
      session_.discard(c.node, deadline);
      return Attempt(Busy{});
    }
    if (!place.ours) {
      // Our node is gone (deleted by someone, or with an expired session):
      // take a new place at once.
      c.node.clear();
      c.signal->notify(false);
      return Attempt(Busy{});
    }
    return watch_blocker(request, c, path + "/" + queue[*place.blocker], place.last_blocker,
                         place.then_watch ? path + "/" + queue[*place.then_watch] : std::string(), sent, deadline,
                         step);
  }

  // Watches `node`, a node before ours. `last`: it is the only one left
  // that blocks ours; `then`: once it is gone, the only one left. A node
  // already gone is passed at once.
  Result<Attempt> watch_blocker(const LockRequest& request, Contender& c, std::string node, bool last,
                                std::string then, steady::time_point sent, steady::time_point deadline,
                                const std::string& step) {
    for (;;) {
      c.watched = std::move(node);
      c.last_blocker = last;
      c.then_watch = std::move(then);
      (void)c.signal->take_deleted();  // about an earlier blocker
      auto watched = session_.watch(c.watched, c.signal, deadline);
      if (!watched->wait_until(deadline)) return no_reply(step);
      if (watched->rc == ZOK) {
        c.lost_reply_at = {};
        return Attempt(Busy{});
      }
      if (watched->rc != ZNONODE) return look_again_after(watched->rc, c, step, c.watched);
      if (last) return grant(request, c, sent);
      if (c.then_watch.empty()) {
        c.signal->notify(false);  // list again now
        return Attempt(Busy{});
      }
      node = std::exchange(c.then_watch, {});
      then.clear();
      last = true;
    }
  }

  // A waiter's step answered `rc`. A reply that went with the connection
  // ends only this attempt: the session may well live on (the client
  // reconnects within the session timeout, as after a server paused by its
  // garbage collector), and the session wakes its waiters when it is
  // connected again; the waiter then looks again, its node still in its
  // place if the session lived on. It does not wait here (the async API's
  // one thread runs every waiter's attempts). The call fails once replies
  // have been going with the connection for op_timeout.
  Result<Attempt> look_again_after(int rc, Contender& c, const std::string& step, const std::string& path) {
    if (!Session::reply_lost(rc)) return to_status(rc, step, path);
    const auto now = steady::now();
    if (c.lost_reply_at == steady::time_point{}) c.lost_reply_at = now;
    if (now - c.lost_reply_at >= session_.config().op_timeout) {
      c.lost_reply_at = {};
      return to_status(rc, step, path);
    }
    return Attempt(Busy{});
  }

  Attempt grant(const LockRequest& request, Contender& c, steady::time_point sent) {
    if (c.generation != session_.generation()) {
      // The answer came on a newer session than the one that made our node
      // (the old one expired while this process stood still, and the client
      // opened another): it says nothing about our node, which went with
      // its session. Queue again (the next attempt sees the generation
      // change and makes a new node).
      c.signal->notify(false);
      return Attempt(Busy{});
    }
    if (steady::now() - sent >= session_.negotiated_timeout()) {
      // Read after our session may have ended (this process stood still
      // between the request and its answer for a whole session timeout):
      // not a grant. Look again, asking the server afresh.
      c.signal->notify(false);
      return Attempt(Busy{});
    }
    c.lost_reply_at = {};
    Grant g;
    g.token = c.czxid;
    g.valid_until = sent + request.lease;
    // A leader is told at once if its node is deleted under it (its
    // leadership may last hours); a mutex holder at its next renewal, which
    // saves a watch, and the notification our own delete would trigger, per lock.
    g.dropped = session_.hold(c.node, request.mode == LeaseMode::fixed ? g.valid_until : steady::time_point::max(),
                              request.kind == LockKind::leader);
    auto state = std::make_unique<NodeGrant>();
    state->node = c.node;
    g.state = std::move(state);
    c.granted = true;
    return Attempt(std::move(g));
  }

  Session session_;
  PendingReplies unanswered_;  // releases sent and not yet answered
  std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<Contender>> contenders_;  // (owner, name)
  CountNodes count_nodes_{session_};
  CasCounters counters_{count_nodes_};
  Latches latches_{session_};
  Semaphores semaphores_{session_, *this};
  Barriers barriers_{session_};
};

}  // namespace
}  // namespace zookeeper

Result<std::unique_ptr<Backend>> open_zookeeper_backend(const Url& url, const ClientOptions& options) {
  auto config = zookeeper::parse_config(url, options);
  if (!config) return config.status();
  auto backend = std::make_unique<zookeeper::ZooKeeperBackend>(std::move(*config));
  if (Status s = backend->start(); !s) return s;
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace dlock::detail
