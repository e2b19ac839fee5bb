// session.h — one ZooKeeper session shared by every thread of a client,
// and the bookkeeping of the ephemeral nodes it holds.
//
// Calls are asynchronous underneath (the C client's own I/O and completion
// threads) so that several can be in flight at once — a create and the
// getChildren that follows it go out back to back — and every wait has a
// deadline: a dead ensemble is an error within op_timeout, never a hang.
//
// Session states map to dlock's: connected; suspended (the connection
// dropped, the session may still live); reconnected; lost (expired: every
// ephemeral node of it is gone, and a new session is opened — never the old
// nodes silently recreated). When held locks count as lost is the lost_on
// policy (config.h); at that moment `dropped()` fires for every grant made
// so far, and the nodes still held are deleted as soon as the ensemble can
// be reached (a lock we declared lost must not stay taken).
#pragma once

#include "backends/zookeeper/config.h"
#include "backends/zookeeper/inherited_descriptors.h"
#include "core/driver.h"

#include <zookeeper/zookeeper.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace dlock::detail::zookeeper {

class Session;
class Call;
using CallPtr = std::shared_ptr<Call>;

// One asynchronous call: filled in by the C client's completion thread.
// A call that meets an expired session (or is cut short when its handle is
// closed after expiry) is issued again in the next one: everything the old
// session made is gone, so that is always safe.
class Call : public std::enable_shared_from_this<Call> {
 public:
  using Issue = std::function<int(zhandle_t*, CallPtr*)>;
  // `then`, if given, runs on the C client's completion thread with the
  // first reply, whatever it is (no reissue: for calls nobody waits on).
  using Then = std::function<void(const Call&)>;
  Call(Session* session, Issue issue, Then then = {})
      : session_(session), issue_(std::move(issue)), then_(std::move(then)) {}

  // false if no reply came by `deadline` (the call may still complete later).
  bool wait_until(steady::time_point deadline);
  void finish(int rc, const char* path, const Stat* stat, const String_vector* children);

  int rc = ZSYSTEMERROR;  // valid after wait_until() returned true
  std::string path;       // create: the node's name with its sequence number
  Stat stat{};            // create2, exists, get
  std::vector<std::string> children;
  std::string data;       // get, watch: the node's data
  std::uint64_t generation = 0;  // the session it was last issued in

 private:
  friend class Session;
  Session* session_;
  Issue issue_;
  Then then_;  // taken by the first finish()
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

// Something a thread waits for: a watch fired, the session changed.
class Signal {
 public:
  // true if notified before `until` (the flag is then consumed).
  bool wait_until(steady::time_point until);
  void notify(bool node_deleted);
  // From now on `notify` also runs (without the signal's mutex, on the
  // thread that notifies) on each notification; at once if one is pending.
  void call_back(std::function<void()> notify);
  // A watched node was deleted: `node`, its path.
  void notify_deleted(std::string node);
  // Whether a watched node was deleted since the last take (consumed).
  bool take_deleted();
  // Whether `node` was among the watched nodes deleted since the last take
  // (all consumed): a watch left on a node no longer of interest can't be
  // mistaken for the one that matters now.
  bool take_deleted(std::string_view node);

  std::uint64_t id = 0;  // its watches' id; set by Session under its watch mutex

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool notified_ = false;
  bool deleted_ = false;
  std::function<void()> on_notify_;  // guarded by mu_
  std::vector<std::string> deleted_nodes_;
};

class Session {
 public:
  explicit Session(Config config);
  ~Session();  // closes the session: the ensemble deletes its ephemeral nodes at once
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Connects (and authenticates) within op_timeout; refuses a negotiated
  // session timeout below the one asked for.
  Status start();

  const Config& config() const { return config_; }
  std::chrono::milliseconds negotiated_timeout() const;
  // Changes whenever a new session replaces an expired one: nodes made in
  // an older one are gone.
  std::uint64_t generation() const;
  // The session id (ephemeralOwner of the nodes it creates).
  std::int64_t session_id() const;
  // Whether the ensemble is reachable right now.
  bool connected() const;
  // Waits until it is (a dropped connection reconnected, or an expired
  // session replaced); false if not by `deadline` or while shutting down.
  bool wait_connected(steady::time_point deadline);
  // True once the client is connected again, before `deadline`, after a
  // reply that went with the connection (`rc` is reply_lost); false for any
  // other `rc`. The session may well live on: the client reconnects within
  // the session timeout, as after a server paused by its garbage collector.
  bool reconnected_after(int rc, steady::time_point deadline);

  // Asynchronous calls; wait on the returned Call. If the session has just
  // expired, each first waits (until `deadline`) for its replacement.
  // flags: ZOO_EPHEMERAL_SEQUENTIAL, ZOO_CONTAINER; `data`: the node's (empty: none).
  CallPtr create(const std::string& path, int flags, steady::time_point deadline, std::string_view data = {});
  CallPtr get_children(const std::string& path, steady::time_point deadline);
  CallPtr remove(const std::string& path, steady::time_point deadline);
  CallPtr exists(const std::string& path, steady::time_point deadline);
  // Reads `path` and leaves a one-shot watch on it that notifies `signal`
  // (no watch is left if the node does not exist: rc ZNONODE).
  CallPtr watch(const std::string& path, const std::shared_ptr<Signal>& signal, steady::time_point deadline);
  // Lists `path`'s children and leaves a one-shot watch on them that
  // notifies `signal` when a child is added or removed.
  CallPtr watch_children(const std::string& path, const std::shared_ptr<Signal>& signal, steady::time_point deadline);
  // Like exists(), and leaves a one-shot watch on `path` that notifies
  // `signal` when it is created, changed or deleted — also when it does not
  // exist yet (rc ZNONODE), so its creation can be waited for.
  CallPtr watch_exists(const std::string& path, const std::shared_ptr<Signal>& signal, steady::time_point deadline);
  // Reads `path`'s data (Call::data) and stat.
  CallPtr get(const std::string& path, steady::time_point deadline);
  // Replaces `path`'s data if its version is still `version` (ZBADVERSION
  // otherwise; -1: whatever the version).
  CallPtr set(const std::string& path, std::string data, int version, steady::time_point deadline);
  // Forgets a signal: its watch, if it fires later, notifies nobody.
  void unwatch(const std::shared_ptr<Signal>& signal);

  // Creates every missing ancestor of `path` (not `path`) as a container.
  Status create_parents(const std::string& path, steady::time_point deadline, std::string_view step);
  // create(), and if the ensemble says an ancestor is missing, makes the
  // ancestors and creates once more. The create call, answered unless
  // `deadline` passed; an error only if making the ancestors failed.
  Result<CallPtr> create_with_parents(const std::string& path, int flags, steady::time_point deadline,
                                      std::string_view step, std::string_view data = {});

  // A node created (sequential) as <parent>/<prefix><seq>.
  struct Created {
    std::string node;
    std::uint64_t czxid = 0;
    std::uint64_t generation = 0;        // the session it was made in
    std::vector<std::string> children;   // <parent>'s, as listed just after
  };
  // Whether a call's reply was lost with the connection (it may or may not
  // have been applied).
  static bool reply_lost(int rc) { return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT; }
  // A create of <parent>/<prefix>… in session `generation` whose reply was
  // lost, found again (Curator's protected mode): once the session is
  // reachable again, the child with our prefix (unique to that create) is
  // ours, kept with its place. nullopt: not made, or made in a session that
  // has since expired (the ephemeral node went with it): create it again.
  // Past `deadline` it gives up like forget_create().
  Result<std::optional<Created>> find_created(const std::string& parent, const std::string& prefix,
                                              std::uint64_t generation, steady::time_point deadline,
                                              std::string_view step);
  // The caller gives up on a create of <parent>/<prefix>… that may have
  // been applied: its node, if any, is deleted once the ensemble answers,
  // never left to count. Returns the no-reply error for `step`.
  Status forget_create(const std::string& parent, const std::string& prefix, std::string_view step);

  // A lock node is ours now: `dropped()` of the returned token fires when
  // the session policy declares it lost. `lease_end`: delete it then
  // (fixed leases; max() for none).
  // `watch_deletion`: also fire it as soon as the node is deleted by anyone
  // else (a watch on it; otherwise the watchdog's next check finds out).
  std::stop_token hold(const std::string& node, steady::time_point lease_end, bool watch_deletion = false);
  // Whether `node` is still held (not dropped); removes it from the books.
  bool unhold(const std::string& node);
  bool holds(const std::string& node) const;
  // Gives back a node held (hold()): unholds and deletes it. lock_lost if
  // it had been dropped or was already gone; unavailable if the ensemble
  // did not answer within op_timeout (it is then deleted later). `what`
  // starts the messages ("unlock 'orders'").
  Status give_back(const std::string& node, const std::string& what);
  // The same without waiting: the delete is sent and `done` gets the
  // outcome on the C client's completion thread. The ensemble runs a
  // session's requests in order, so whatever this session sends next sees
  // the node gone.
  void give_back_async(const std::string& node, const std::string& what, std::function<void(Status)> done);
  // Deletes `node` when the ensemble can be reached, retrying; ends with the session.
  void delete_later(const std::string& node);
  // Deletes a node of ours we no longer want: now, if the ensemble answers
  // by `deadline` (the caller then returns leaving no trace), else as soon
  // as it does (delete_later).
  void discard(const std::string& node, steady::time_point deadline);
  // Deletes the node whose name contains `marker` under `parent` when the
  // ensemble can be reached (a create whose reply was lost, given up on).
  void delete_later_by_marker(const std::string& parent, const std::string& marker);

  // Signals notified on every session change, so waiters re-check.
  void add_waiter(const std::shared_ptr<Signal>& signal);
  void remove_waiter(const std::shared_ptr<Signal>& signal);

 private:
  // What the C client's callbacks get: which session (generation) they are of.
  struct HandleContext {
    Session* session;
    std::uint64_t generation;
  };
  static void on_session_event(zhandle_t* zh, int type, int state, const char* path, void* context);
  static void on_watch(zhandle_t* zh, int type, int state, const char* path, void* context);
  zhandle_t* open_handle(std::uint64_t generation);
  // The watcher context that routes `signal`'s watches to it (registers it once).
  void* watch_context(const std::shared_ptr<Signal>& signal);
  friend class Call;
  CallPtr call(steady::time_point deadline, Call::Issue how, Call::Then then = {});
  // Issues `c` on the current handle; on an expired one, waits (until
  // `deadline`) for the monitor to open the next session and issues it there.
  void start(const CallPtr& c, steady::time_point deadline);
  // After `c` met an expired session: false if no new one by `deadline`.
  bool reissue(const CallPtr& c, steady::time_point deadline);
  void monitor();
  void drop_holds(std::unique_lock<std::mutex>& lk);
  // Leaves a one-shot watch on a held node whose deletion fires its hold.
  void watch_held(const std::string& node);
  void sweep(std::unique_lock<std::mutex>& lk);

  const Config config_;
  const ACL_vector* acl_;
  InheritedDescriptors inherited_;  // kept out of programs a fork + exec runs

  mutable std::shared_mutex handle_mu_;  // exclusive only to replace zh_
  zhandle_t* zh_ = nullptr;
  std::unique_ptr<HandleContext> context_;  // zh_'s; replaced with it

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int> events_;                  // session states from the C client
  steady::time_point next_sweep_ = steady::time_point::min();
  bool connected_ = false;
  bool ever_connected_ = false;  // guarded by mu_: a later CONNECTED is a reconnect
  bool stopping_ = false;
  bool kicked_ = false;                     // the monitor has new work (nodes to delete, a lease end)
  std::uint64_t generation_ = 1;
  std::uint64_t opened_ = 1;                // the generation whose handle zh_ is
  std::int64_t session_id_ = 0;
  std::chrono::milliseconds negotiated_{};
  steady::time_point suspended_at_ = steady::time_point::max();
  struct Held {
    steady::time_point lease_end;  // max: none
    std::stop_source dropped;      // fired when the policy or a deletion takes it from us
  };
  std::map<std::string, Held> held_;                 // node -> its hold
  std::vector<std::string> deleted_held_;            // held nodes a watch saw deleted, for the monitor
  std::set<std::string> orphans_;                    // nodes to delete
  std::set<std::pair<std::string, std::string>> lost_creates_;  // (parent, marker)
  std::set<std::shared_ptr<Signal>> waiters_;
  std::unordered_map<std::uint64_t, std::weak_ptr<Signal>> watches_;  // guarded by watch_mu_
  std::unordered_map<std::uint64_t, std::string> held_watches_;       // guarded by watch_mu_: id -> held node
  std::mutex watch_mu_;
  std::uint64_t next_watch_ = 1;                      // guarded by watch_mu_
  std::thread monitor_;
};

// "_c_<uuid>-<node name>": Curator's protected-name prefix for a
// sequential node, unique per create, so a node whose create reply was
// lost can be found again by it.
Result<std::string> protected_prefix(std::string_view node_name);

// A Waiter on `signal`, which the session also notifies on every session
// change, so the waiter reads again rather than trust a watch the old
// session held. Gone, it forgets the signal and any watch left on it.
class SessionWaiter final : public Waiter {
 public:
  SessionWaiter(Session& session, std::shared_ptr<Signal> signal) : session_(session), signal_(std::move(signal)) {
    session_.add_waiter(signal_);
  }
  ~SessionWaiter() override { session_.remove_waiter(signal_); }
  Status wait_until(steady::time_point until) override {
    signal_->wait_until(until);
    return {};
  }

 private:
  Session& session_;
  std::shared_ptr<Signal> signal_;
};

}  // namespace dlock::detail::zookeeper
