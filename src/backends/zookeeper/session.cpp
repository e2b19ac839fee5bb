#include "backends/zookeeper/session.h"

#include "backends/zookeeper/errors.h"
#include "core/owner_id.h"
#include "core/thread_name.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <optional>

namespace dlock::detail::zookeeper {
namespace {

using std::chrono::milliseconds;

// How often nodes still to delete are retried while the ensemble answers.
constexpr milliseconds sweep_retry{1'000};

// The C client logs connection errors to stderr by itself; a library must
// not. DLOCK_ZK_LOG=1..4 turns its log back on for debugging.
void quiet_client_log() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* level = std::getenv("DLOCK_ZK_LOG");
    zoo_set_debug_level(static_cast<ZooLogLevel>(level ? std::atoi(level) : 0));
  });
}

// The client ports of the ensemble's hosts ("h:p,h:p").
std::set<int> ensemble_ports(const std::string& hosts) {
  std::set<int> ports;
  for (std::size_t at = 0; at < hosts.size();) {
    auto comma = hosts.find(',', at);
    auto host = hosts.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    ports.insert(std::atoi(host.substr(host.rfind(':') + 1).c_str()));
    at = comma == std::string::npos ? hosts.size() : comma + 1;
  }
  return ports;
}

// Completion `data` is a heap-allocated CallPtr the completion takes back.
CallPtr* adopt(const CallPtr& call) { return new CallPtr(call); }
std::unique_ptr<CallPtr> take(const void* data) {
  return std::unique_ptr<CallPtr>(static_cast<CallPtr*>(const_cast<void*>(data)));
}

void on_string_stat(int rc, const char* value, const Stat* stat, const void* data) {
  (*take(data))->finish(rc, value, stat, nullptr);
}
void on_strings(int rc, const String_vector* strings, const void* data) {
  (*take(data))->finish(rc, nullptr, nullptr, strings);
}
void on_void(int rc, const void* data) { (*take(data))->finish(rc, nullptr, nullptr, nullptr); }
void on_stat(int rc, const Stat* stat, const void* data) { (*take(data))->finish(rc, nullptr, stat, nullptr); }
void on_data(int rc, const char* value, int length, const Stat* stat, const void* data) {
  auto call = take(data);
  // Written before finish() publishes the reply under the call's mutex.
  if (rc == ZOK && value && length > 0) (*call)->data.assign(value, static_cast<std::size_t>(length));
  (*call)->finish(rc, nullptr, stat, nullptr);
}


}  // namespace

bool Call::wait_until(steady::time_point deadline) {
  for (;;) {
    {
      std::unique_lock lk(mu_);
      if (!cv_.wait_until(lk, deadline, [&] { return done_; })) return false;
      // Expired, or cut short when the expired handle was closed: issue it
      // again in the next session (reissue() declines while shutting down).
      if (rc != ZSESSIONEXPIRED && rc != ZINVALIDSTATE && rc != ZCLOSING) return true;
    }
    if (!session_->reissue(shared_from_this(), deadline)) return true;
  }
}

void Call::finish(int code, const char* created, const Stat* s, const String_vector* strings) {
  Then then;
  {
    std::lock_guard lk(mu_);
    rc = code;
    if (code == ZOK) {
      if (created) path = created;
      if (s) stat = *s;
      if (strings)
        for (int i = 0; i < strings->count; ++i) children.emplace_back(strings->data[i]);
    }
    done_ = true;
    then = std::move(then_);
    then_ = nullptr;
  }
  cv_.notify_all();
  if (then) then(*this);
}

bool Signal::wait_until(steady::time_point until) {
  std::unique_lock lk(mu_);
  bool woke = cv_.wait_until(lk, until, [&] { return notified_; });
  notified_ = false;
  return woke;
}

void Signal::notify(bool node_deleted) {
  std::function<void()> call;
  {
    std::lock_guard lk(mu_);
    notified_ = true;
    deleted_ = deleted_ || node_deleted;
    call = on_notify_;
  }
  cv_.notify_all();
  if (call) call();
}

void Signal::notify_deleted(std::string node) {
  std::function<void()> call;
  {
    std::lock_guard lk(mu_);
    notified_ = true;
    deleted_ = true;
    deleted_nodes_.push_back(std::move(node));
    call = on_notify_;
  }
  cv_.notify_all();
  if (call) call();
}

void Signal::call_back(std::function<void()> notify) {
  bool pending;
  {
    std::lock_guard lk(mu_);
    on_notify_ = notify;
    pending = notified_;
  }
  if (pending) notify();
}

bool Signal::take_deleted() {
  std::lock_guard lk(mu_);
  deleted_nodes_.clear();
  return std::exchange(deleted_, false);
}

bool Signal::take_deleted(std::string_view node) {
  std::lock_guard lk(mu_);
  const bool found = std::find(deleted_nodes_.begin(), deleted_nodes_.end(), node) != deleted_nodes_.end();
  deleted_nodes_.clear();
  deleted_ = false;
  return found;
}

Session::Session(Config config)
    : config_(std::move(config)),
      acl_(config_.user ? &ZOO_CREATOR_ALL_ACL : &ZOO_OPEN_ACL_UNSAFE),
      inherited_(ensemble_ports(config_.hosts)) {
  quiet_client_log();
}

Session::~Session() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (monitor_.joinable()) monitor_.join();
  std::unique_lock hl(handle_mu_);
  if (zh_) zookeeper_close(zh_);
}

zhandle_t* Session::open_handle(std::uint64_t generation) {
  context_ = std::make_unique<HandleContext>(HandleContext{this, generation});
  inherited_.before_init();
  zhandle_t* zh = zookeeper_init(config_.hosts.c_str(), &Session::on_session_event,
                                 static_cast<int>(config_.session_timeout.count()), nullptr, context_.get(), 0);
  inherited_.after_init();
  if (zh && config_.user) {
    const std::string credentials = *config_.user + ":" + *config_.password;
    // The digest scheme accepts any credentials; the ACLs decide what they may do.
    (void)zoo_add_auth(zh, "digest", credentials.data(), static_cast<int>(credentials.size()), nullptr, nullptr);
  }
  return zh;
}

Status Session::start() {
  const auto deadline = steady::now() + config_.op_timeout;
  {
    std::unique_lock hl(handle_mu_);
    zh_ = open_handle(generation_);
    if (!zh_)
      return Status(errc::invalid_argument, "zookeeper url " + config_.redacted_url +
                                                ": the client refused the host list (" + config_.hosts + ")");
  }
  std::unique_lock lk(mu_);
  if (!cv_.wait_until(lk, deadline, [&] { return connected_; }))
    return Status(errc::unavailable, "zookeeper " + config_.redacted_url + ": no server answered within " +
                                         std::to_string(config_.op_timeout.count()) + " ms (ClientOptions::op_timeout)");
  if (negotiated_ < config_.session_timeout)
    return Status(errc::invalid_argument,
                  "zookeeper " + config_.redacted_url + ": session_timeout " +
                      std::to_string(config_.session_timeout.count()) + " ms asked, the ensemble allows only " +
                      std::to_string(negotiated_.count()) + " ms (its maxSessionTimeout); ask for less");
  events_.clear();
  lk.unlock();
  monitor_ = std::thread([this] {
    name_this_thread("dlock-zk-mon");
    monitor();
  });
  return {};
}

std::chrono::milliseconds Session::negotiated_timeout() const {
  std::lock_guard lk(mu_);
  return negotiated_;
}

std::uint64_t Session::generation() const {
  std::lock_guard lk(mu_);
  return generation_;
}

bool Session::connected() const {
  std::lock_guard lk(mu_);
  return connected_;
}

bool Session::wait_connected(steady::time_point deadline) {
  std::unique_lock lk(mu_);
  return cv_.wait_until(lk, deadline, [&] { return connected_ || stopping_; }) && !stopping_;
}

bool Session::reconnected_after(int rc, steady::time_point deadline) {
  if (!reply_lost(rc)) return false;
  // The client may not have noticed the drop yet: don't spin on it.
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return steady::now() < deadline && wait_connected(deadline);
}

std::int64_t Session::session_id() const {
  std::lock_guard lk(mu_);
  return session_id_;
}

void Session::on_session_event(zhandle_t* zh, int type, int state, const char*, void* context) {
  if (type != ZOO_SESSION_EVENT) return;
  auto* ctx = static_cast<HandleContext*>(context);
  Session& self = *ctx->session;
  enum class Change { none, lost, restored, expired } change = Change::none;
  {
    std::lock_guard lk(self.mu_);
    if (ctx->generation != self.generation_) return;  // a handle being closed
    if (state == ZOO_CONNECTED_STATE) {
      if (!self.connected_ && self.ever_connected_) change = Change::restored;
      self.ever_connected_ = true;
      self.connected_ = true;
      self.suspended_at_ = steady::time_point::max();
      self.session_id_ = zoo_client_id(zh)->client_id;
      self.negotiated_ = milliseconds(zoo_recv_timeout(zh));
    } else if (state == ZOO_CONNECTING_STATE || state == ZOO_ASSOCIATING_STATE) {
      if (self.connected_) {
        self.suspended_at_ = steady::now();
        change = Change::lost;
      }
      self.connected_ = false;
    } else {
      if (state == ZOO_EXPIRED_SESSION_STATE) change = Change::expired;
      self.connected_ = false;  // expired, auth failed, closing
    }
    self.events_.push_back(state);
  }
  self.cv_.notify_all();
  // Outside the lock: the user's log callback runs here.
  if (Events* events = self.config_.events) {
    if (change == Change::lost) events->connection_lost(self.config_.redacted_url + ": session suspended");
    if (change == Change::expired) events->connection_lost(self.config_.redacted_url + ": session expired");
    if (change == Change::restored) events->connection_restored(self.config_.redacted_url);
  }
}

void Session::on_watch(zhandle_t* zh, int type, int, const char* path, void* context) {
  auto* ctx = static_cast<const HandleContext*>(zoo_get_context(zh));
  Session& self = *ctx->session;
  std::shared_ptr<Signal> signal;
  std::optional<std::string> held_node;
  {
    std::lock_guard lk(self.watch_mu_);
    const auto id = reinterpret_cast<std::uintptr_t>(context);
    if (auto it = self.watches_.find(id); it != self.watches_.end()) {
      signal = it->second.lock();
    } else if (auto h = self.held_watches_.find(id); h != self.held_watches_.end()) {
      held_node = std::move(h->second);
      self.held_watches_.erase(h);  // one-shot
    }
  }
  if (held_node) {
    // The monitor fires the hold: never a stop callback on the C client's
    // thread, which would wait for itself. Any other event (a change of
    // data, which our recipes never make) spends the watch: the
    // watchdog's checks remain.
    if (type == ZOO_DELETED_EVENT) {
      {
        std::lock_guard lk(self.mu_);
        self.deleted_held_.push_back(std::move(*held_node));
        self.kicked_ = true;
      }
      self.cv_.notify_all();
    }
    return;
  }
  if (!signal) return;
  if (type == ZOO_DELETED_EVENT && path) signal->notify_deleted(path);
  else signal->notify(false);
}

CallPtr Session::call(steady::time_point deadline, Call::Issue how, Call::Then then) {
  auto c = std::make_shared<Call>(this, std::move(how), std::move(then));
  start(c, deadline);
  return c;
}

// A call the client refuses outright (ZINVALIDSTATE once the session has
// expired) never reaches a completion: it is finished here.
void Session::start(const CallPtr& c, steady::time_point deadline) {
  for (;;) {
    int rc;
    {
      std::shared_lock hl(handle_mu_);
      c->generation = context_->generation;
      CallPtr* data = adopt(c);
      rc = c->issue_(zh_, data);
      if (rc != ZOK) delete data;
    }
    if (rc == ZOK) return;
    // A call nobody waits on (then_) is not carried into the next session:
    // it would block its sender until that session is in place.
    if (rc != ZINVALIDSTATE || c->then_ || !reissue(c, deadline)) {
      c->finish(rc, nullptr, nullptr, nullptr);
      return;
    }
  }
}

bool Session::reissue(const CallPtr& c, steady::time_point deadline) {
  {
    std::unique_lock lk(mu_);
    // Until the next session's handle is in place, not merely decided on.
    if (!cv_.wait_until(lk, deadline, [&] { return stopping_ || opened_ != c->generation; }) || stopping_)
      return false;
  }
  {
    std::lock_guard lk(c->mu_);
    c->done_ = false;
    c->rc = ZSYSTEMERROR;
    c->path.clear();
    c->children.clear();
  }
  start(c, deadline);
  return true;
}

CallPtr Session::create(const std::string& path, int flags, steady::time_point deadline, std::string_view value) {
  return call(deadline, [path, flags, acl = acl_, value = std::string(value)](zhandle_t* zh, CallPtr* data) {
    return zoo_acreate2(zh, path.c_str(), value.empty() ? nullptr : value.data(),
                        value.empty() ? -1 : static_cast<int>(value.size()), acl, flags, on_string_stat, data);
  });
}

CallPtr Session::get_children(const std::string& path, steady::time_point deadline) {
  return call(deadline, [path](zhandle_t* zh, CallPtr* data) {
    return zoo_aget_children(zh, path.c_str(), 0, on_strings, data);
  });
}

CallPtr Session::remove(const std::string& path, steady::time_point deadline) {
  return call(deadline,
              [path](zhandle_t* zh, CallPtr* data) { return zoo_adelete(zh, path.c_str(), -1, on_void, data); });
}

CallPtr Session::exists(const std::string& path, steady::time_point deadline) {
  return call(deadline,
              [path](zhandle_t* zh, CallPtr* data) { return zoo_aexists(zh, path.c_str(), 0, on_stat, data); });
}

CallPtr Session::get(const std::string& path, steady::time_point deadline) {
  return call(deadline,
              [path](zhandle_t* zh, CallPtr* data) { return zoo_aget(zh, path.c_str(), 0, on_data, data); });
}

void* Session::watch_context(const std::shared_ptr<Signal>& signal) {
  std::lock_guard lk(watch_mu_);
  if (!signal->id) {
    signal->id = next_watch_++;
    watches_[signal->id] = signal;
  }
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(signal->id));
}

CallPtr Session::watch(const std::string& path, const std::shared_ptr<Signal>& signal, steady::time_point deadline) {
  return call(deadline, [path, id = watch_context(signal)](zhandle_t* zh, CallPtr* data) {
    return zoo_awget(zh, path.c_str(), &Session::on_watch, id, on_data, data);
  });
}

CallPtr Session::watch_children(const std::string& path, const std::shared_ptr<Signal>& signal,
                                steady::time_point deadline) {
  return call(deadline, [path, id = watch_context(signal)](zhandle_t* zh, CallPtr* data) {
    return zoo_awget_children(zh, path.c_str(), &Session::on_watch, id, on_strings, data);
  });
}

CallPtr Session::watch_exists(const std::string& path, const std::shared_ptr<Signal>& signal,
                              steady::time_point deadline) {
  return call(deadline, [path, id = watch_context(signal)](zhandle_t* zh, CallPtr* data) {
    return zoo_awexists(zh, path.c_str(), &Session::on_watch, id, on_stat, data);
  });
}

CallPtr Session::set(const std::string& path, std::string value, int version, steady::time_point deadline) {
  return call(deadline, [path, value = std::move(value), version](zhandle_t* zh, CallPtr* data) {
    return zoo_aset(zh, path.c_str(), value.data(), static_cast<int>(value.size()), version, on_stat, data);
  });
}

void Session::unwatch(const std::shared_ptr<Signal>& signal) {
  std::lock_guard lk(watch_mu_);
  if (signal->id) watches_.erase(signal->id);
}

Status Session::create_parents(const std::string& path, steady::time_point deadline, std::string_view step) {
  // Top down: each ancestor as a container (ZNODEEXISTS is fine), all sent
  // again if a reply went with the connection (creating one twice is fine).
  std::vector<std::string> paths;
  for (auto slash = path.find('/', 1); slash != std::string::npos; slash = path.find('/', slash + 1))
    paths.push_back(path.substr(0, slash));
  for (bool again = true; again;) {
    again = false;
    std::vector<CallPtr> calls;
    for (const std::string& parent : paths) calls.push_back(create(parent, ZOO_CONTAINER, deadline));
    for (std::size_t i = 0; i < calls.size() && !again; ++i) {
      if (!calls[i]->wait_until(deadline)) return no_reply(step);
      again = reconnected_after(calls[i]->rc, deadline);
      if (!again && calls[i]->rc != ZOK && calls[i]->rc != ZNODEEXISTS) return to_status(calls[i]->rc, step, paths[i]);
    }
  }
  return {};
}

Result<CallPtr> Session::create_with_parents(const std::string& path, int flags, steady::time_point deadline,
                                             std::string_view step, std::string_view data) {
  auto made = create(path, flags, deadline, data);
  if (!made->wait_until(deadline) || made->rc != ZNONODE) return made;
  if (Status s = create_parents(path, deadline, step); !s) return s;
  made = create(path, flags, deadline, data);
  (void)made->wait_until(deadline);
  return made;
}

// The session's requests are applied in the order sent, across reconnects
// (a request forwarded after the session moved to another server is
// refused), so a create that isn't listed after the reconnect never will be.
Result<std::optional<Session::Created>> Session::find_created(const std::string& parent, const std::string& prefix,
                                                              std::uint64_t generation, steady::time_point deadline,
                                                              std::string_view step) {
  while (wait_connected(deadline)) {
    if (this->generation() != generation) return std::optional<Created>();
    auto list = get_children(parent, deadline);
    if (!list->wait_until(deadline)) break;
    if (list->generation != generation) return std::optional<Created>();
    if (reconnected_after(list->rc, deadline)) continue;
    if (reply_lost(list->rc)) break;  // not back before the deadline
    if (list->rc == ZNONODE) return std::optional<Created>();
    if (list->rc != ZOK) {
      delete_later_by_marker(parent, prefix);
      return to_status(list->rc, step, parent);
    }
    const auto ours = std::find_if(list->children.begin(), list->children.end(),
                                   [&](const std::string& child) { return child.starts_with(prefix); });
    if (ours == list->children.end()) return std::optional<Created>();
    const std::string node = parent + "/" + *ours;
    auto stat = exists(node, deadline);  // its creation zxid: the fencing token
    if (!stat->wait_until(deadline)) break;
    if (reconnected_after(stat->rc, deadline)) continue;
    if (reply_lost(stat->rc)) break;
    if (stat->rc == ZNONODE || stat->generation != generation) return std::optional<Created>();
    if (stat->rc != ZOK) {
      delete_later(node);
      return to_status(stat->rc, step, node);
    }
    return std::optional<Created>(
        Created{node, static_cast<std::uint64_t>(stat->stat.czxid), generation, std::move(list->children)});
  }
  return forget_create(parent, prefix, step);
}

Status Session::forget_create(const std::string& parent, const std::string& prefix, std::string_view step) {
  delete_later_by_marker(parent, prefix);
  return no_reply(step);
}

std::stop_token Session::hold(const std::string& node, steady::time_point lease_end, bool watch_deletion) {
  bool wake;
  std::stop_token token;
  {
    std::lock_guard lk(mu_);
    auto& held = held_[node];
    held = Held{lease_end, std::stop_source()};
    token = held.dropped.get_token();
    wake = lease_end != steady::time_point::max();
    kicked_ = kicked_ || wake;
  }
  if (wake) cv_.notify_all();
  if (watch_deletion) watch_held(node);
  return token;
}

void Session::watch_held(const std::string& node) {
  void* id;
  {
    std::lock_guard lk(watch_mu_);
    const std::uint64_t n = next_watch_++;
    held_watches_[n] = node;
    id = reinterpret_cast<void*>(static_cast<std::uintptr_t>(n));
  }
  // Not waited for: if the node is already gone no watch is left, and the
  // watchdog's next check finds out instead.
  (void)call(steady::now() + config_.op_timeout, [node, id](zhandle_t* zh, CallPtr* data) {
    return zoo_awget(zh, node.c_str(), &Session::on_watch, id, on_data, data);
  });
}

bool Session::unhold(const std::string& node) {
  {
    std::lock_guard lk(watch_mu_);
    std::erase_if(held_watches_, [&](const auto& w) { return w.second == node; });
  }
  std::lock_guard lk(mu_);
  return held_.erase(node) > 0;
}

bool Session::holds(const std::string& node) const {
  std::lock_guard lk(mu_);
  return held_.contains(node);
}

Status Session::give_back(const std::string& node, const std::string& what) {
  if (!unhold(node))
    return Status(errc::lock_lost, what +
                                       ": no longer ours (the session was suspended or expired, or the fixed lease ran "
                                       "out); its node is deleted when the ensemble answers");
  const auto deadline = steady::now() + config_.op_timeout;
  auto call = remove(node, deadline);
  if (!call->wait_until(deadline)) {
    delete_later(node);
    return no_reply(what);
  }
  if (call->rc == ZOK) return {};
  if (call->rc == ZNONODE || call->rc == ZINVALIDSTATE || call->rc == ZSESSIONEXPIRED)
    return Status(errc::lock_lost, what + ": its node was already gone (force-released, or the session expired)");
  delete_later(node);
  return to_status(call->rc, what, node);
}

void Session::give_back_async(const std::string& node, const std::string& what, std::function<void(Status)> done) {
  if (!unhold(node))
    return done(Status(errc::lock_lost, what +
                                            ": no longer ours (the session was suspended or expired, or the fixed "
                                            "lease ran out); its node is deleted when the ensemble answers"));
  const auto deadline = steady::now() + config_.op_timeout;
  call(deadline,
       [node](zhandle_t* zh, CallPtr* data) { return zoo_adelete(zh, node.c_str(), -1, on_void, data); },
       [this, node, what, done = std::move(done)](const Call& c) {
         if (c.rc == ZOK) return done({});
         // Closing: the session ends and the ensemble deletes its nodes.
         if (c.rc == ZCLOSING) return done({});
         if (c.rc == ZNONODE || c.rc == ZINVALIDSTATE || c.rc == ZSESSIONEXPIRED)
           return done(Status(errc::lock_lost,
                              what + ": its node was already gone (force-released, or the session expired)"));
         delete_later(node);  // the connection dropped before the answer: once it is back
         done(to_status(c.rc, what, node));
       });
}

void Session::discard(const std::string& node, steady::time_point deadline) {
  if (connected()) {
    auto removal = remove(node, deadline);
    if (removal->wait_until(deadline) && (removal->rc == ZOK || removal->rc == ZNONODE)) return;
  }
  delete_later(node);
}

void Session::delete_later(const std::string& node) {
  {
    std::lock_guard lk(mu_);
    orphans_.insert(node);
    next_sweep_ = steady::time_point::min();
    kicked_ = true;
  }
  cv_.notify_all();
}

void Session::delete_later_by_marker(const std::string& parent, const std::string& marker) {
  {
    std::lock_guard lk(mu_);
    lost_creates_.emplace(parent, marker);
    next_sweep_ = steady::time_point::min();
    kicked_ = true;
  }
  cv_.notify_all();
}

void Session::add_waiter(const std::shared_ptr<Signal>& signal) {
  std::lock_guard lk(mu_);
  waiters_.insert(signal);
}

void Session::remove_waiter(const std::shared_ptr<Signal>& signal) {
  {
    std::lock_guard lk(mu_);
    waiters_.erase(signal);
  }
  unwatch(signal);
}

// Every lock held so far is declared lost: its grant's dropped() fires (the
// callbacks run here, outside every lock) and its node is deleted as soon
// as the ensemble answers, if the session still has it.
void Session::drop_holds(std::unique_lock<std::mutex>& lk) {
  std::vector<std::stop_source> fired;
  for (auto& [node, held] : held_) {
    orphans_.insert(node);
    fired.push_back(std::move(held.dropped));
  }
  held_.clear();
  next_sweep_ = steady::time_point::min();
  lk.unlock();
  {
    std::lock_guard wl(watch_mu_);
    held_watches_.clear();
  }
  for (auto& f : fired) f.request_stop();
  lk.lock();
}

void Session::sweep(std::unique_lock<std::mutex>& lk) {
  std::vector<std::string> nodes(orphans_.begin(), orphans_.end());
  std::vector<std::pair<std::string, std::string>> markers(lost_creates_.begin(), lost_creates_.end());
  const std::uint64_t generation = generation_;
  lk.unlock();
  const auto deadline = steady::now() + config_.op_timeout;
  // Nodes whose create reply was lost: find them by their marker.
  std::vector<CallPtr> listings;
  for (const auto& [parent, marker] : markers) listings.push_back(get_children(parent, deadline));
  std::vector<std::pair<std::string, std::string>> markers_done;
  for (std::size_t i = 0; i < markers.size(); ++i) {
    if (!listings[i]->wait_until(deadline)) continue;
    if (listings[i]->rc == ZNONODE) markers_done.push_back(markers[i]);
    if (listings[i]->rc != ZOK) continue;
    for (const auto& child : listings[i]->children)
      if (child.find(markers[i].second) != std::string::npos) nodes.push_back(markers[i].first + "/" + child);
    markers_done.push_back(markers[i]);
  }
  std::vector<CallPtr> removals;
  for (const auto& node : nodes) removals.push_back(remove(node, deadline));
  std::vector<std::string> nodes_done;
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (removals[i]->wait_until(deadline) && (removals[i]->rc == ZOK || removals[i]->rc == ZNONODE))
      nodes_done.push_back(nodes[i]);
  lk.lock();
  if (generation != generation_) return;  // expired meanwhile: the books were cleared
  for (const auto& m : markers_done) lost_creates_.erase(m);
  for (const auto& n : nodes_done) orphans_.erase(n);
  // A node found by marker but not deleted stays in orphans_.
  for (const auto& n : nodes)
    if (std::find(nodes_done.begin(), nodes_done.end(), n) == nodes_done.end()) orphans_.insert(n);
  next_sweep_ = steady::now() + sweep_retry;
}

void Session::monitor() {
  std::unique_lock lk(mu_);
  while (!stopping_) {
    kicked_ = false;
    auto now = steady::now();
    // Session changes, in order.
    while (!events_.empty()) {
      const int state = events_.front();
      events_.pop_front();
      if ((state == ZOO_CONNECTING_STATE || state == ZOO_ASSOCIATING_STATE) && config_.lost_on_suspend) {
        drop_holds(lk);
      } else if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE) {
        // Every ephemeral node of the old session is gone: nothing left to delete.
        drop_holds(lk);
        orphans_.clear();
        lost_creates_.clear();
        ++generation_;
        connected_ = false;
        const std::uint64_t generation = generation_;
        lk.unlock();
        {
          std::unique_lock hl(handle_mu_);
          zookeeper_close(zh_);
          zh_ = open_handle(generation);
        }
        lk.lock();
        opened_ = generation;
        cv_.notify_all();
      }
      for (const auto& w : waiters_) w->notify(false);  // re-check on every change
    }
    // lost_on=expiry: the client notices a silent connection after 2/3 of
    // the timeout, and the ensemble expires the session a full timeout after
    // it last heard from us — so at most a third later. Give up after a
    // quarter, ahead of any other client taking the lock.
    if (!config_.lost_on_suspend && !connected_ && suspended_at_ != steady::time_point::max() &&
        now >= suspended_at_ + negotiated_ / 4 && !held_.empty())
      drop_holds(lk);
    // Held nodes a watch saw go: someone else deleted them, lost now.
    if (!deleted_held_.empty()) {
      std::vector<std::stop_source> fired;
      for (const auto& node : std::exchange(deleted_held_, {})) {
        if (auto it = held_.find(node); it != held_.end()) {
          fired.push_back(std::move(it->second.dropped));
          held_.erase(it);
        }
      }
      lk.unlock();
      for (auto& f : fired) f.request_stop();
      lk.lock();
      continue;
    }
    // Fixed leases that ran out: the lock is no longer ours to keep.
    for (auto it = held_.begin(); it != held_.end();) {
      if (now >= it->second.lease_end) {
        orphans_.insert(it->first);
        next_sweep_ = steady::time_point::min();
        it = held_.erase(it);
      } else {
        ++it;
      }
    }
    if (connected_ && (!orphans_.empty() || !lost_creates_.empty()) && now >= next_sweep_) {
      sweep(lk);
      continue;
    }
    auto wake = now + std::chrono::seconds(1);
    for (const auto& [node, held] : held_) wake = std::min(wake, held.lease_end);
    if (!config_.lost_on_suspend && suspended_at_ != steady::time_point::max())
      wake = std::min(wake, suspended_at_ + negotiated_ / 4);
    if (connected_ && (!orphans_.empty() || !lost_creates_.empty())) wake = std::min(wake, next_sweep_);
    cv_.wait_until(lk, wake, [&] { return stopping_ || kicked_ || !events_.empty() || !deleted_held_.empty(); });
  }
}

Result<std::string> protected_prefix(std::string_view node_name) {
  auto uuid = random_uuid();
  if (!uuid) return uuid.status();
  return "_c_" + *uuid + "-" + std::string(node_name);
}

}  // namespace dlock::detail::zookeeper
