// The etcd:// backend: Mutex on etcd, the layout of etcd's concurrency.Mutex,
// so a dlock mutex, `etcdctl lock` and a Go service's Mutex on the same name
// exclude each other and share one queue.
//
//   <prefix>/<name>/<lease id, lowercase hex>   one key per contender, value
//                                               empty, attached to the
//                                               contender's lease; the key with
//                                               the lowest create revision
//                                               holds the lock
//
// Acquire: one Txn puts our key if it is absent and reads the first key by
// create revision (one round trip when the lock is free). If ours is first
// we hold it; else we watch the one key created last before ours, for its
// deletion, so a release wakes the next contender only, never a herd. When
// it goes we look again (that key's owner may have been queued behind
// another). A waiter that gives up deletes its key; one that dies loses it
// with its lease.
//
// The key is per lease, and the lease is the client's: two threads of one
// client must not share a key, so within a client one owner at a time may
// have a key under a name (the others wait for it here, woken when it
// releases or gives up).
//
// Fencing token: our key's create revision. Revisions are issued in the
// order the cluster applies writes, and a later holder's key was created
// after the earlier holder's, so tokens strictly increase per lock, across
// leader elections too.
//
// Lease: a watchdog hold lasts as long as the client's lease (session.h)
// and its renewal reads the key back, so a force-release is noticed. A fixed
// lease moves the key, once granted, onto a lease of its own with the
// lease's length (rounded up to whole seconds, and at least etcd's minimum),
// which nobody renews.
#include "backends/etcd/config.h"
#include "backends/etcd/errors.h"
#include "backends/etcd/session.h"

#include "core/queue_waiter.h"
#include "core/registry.h"
#include "core/validate.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>
#include <utility>

namespace dlock::detail {
namespace etcd {
namespace {

using std::chrono::milliseconds;

std::string hex(std::int64_t id) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(id));
  return buf;
}

// The end of the key range that starts with `prefix` (etcd's prefix rule:
// the prefix with its last byte incremented).
std::string range_end(std::string prefix) {
  while (!prefix.empty()) {
    if (static_cast<unsigned char>(prefix.back()) < 0xff) {
      prefix.back() = static_cast<char>(static_cast<unsigned char>(prefix.back()) + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');
}

// Reads the first (or last) key of a prefix by create revision; `below`:
// only keys created before that revision.
pb::RangeRequest first_created(const std::string& prefix, bool last = false, std::int64_t below = 0) {
  pb::RangeRequest r;
  r.set_key(prefix);
  r.set_range_end(range_end(prefix));
  r.set_sort_target(pb::RangeRequest::CREATE);
  r.set_sort_order(last ? pb::RangeRequest::DESCEND : pb::RangeRequest::ASCEND);
  r.set_limit(1);
  if (below > 0) r.set_max_create_revision(below - 1);
  return r;
}

pb::RangeRequest one_key(const std::string& key) {
  pb::RangeRequest r;
  r.set_key(key);
  return r;
}

pb::Compare created_at(const std::string& key, std::int64_t revision) {
  pb::Compare c;
  c.set_result(pb::Compare::EQUAL);
  c.set_target(pb::Compare::CREATE);
  c.set_key(key);
  c.set_create_revision(revision);
  return c;
}

// Deletes `key` if it is still the one created at `revision`: true if it was.
Result<bool> delete_if_created_at(Session& session, const std::string& key, std::int64_t revision,
                                  steady::time_point deadline, std::string_view step) {
  pb::TxnRequest t;
  *t.add_compare() = created_at(key, revision);
  t.add_success()->mutable_request_delete_range()->set_key(key);
  auto r = session.txn(t, deadline, step);
  if (!r) return r.status();
  return r->succeeded();
}

// Notified by one watch (Session::watch), which it cancels when it goes.
class WatchWaiter final : public Waiter {
 public:
  WatchWaiter(Session& session, std::int64_t id, std::shared_ptr<Signal> signal)
      : session_(session), id_(id), signal_(std::move(signal)) {}
  ~WatchWaiter() override { session_.unwatch(id_); }
  WatchWaiter(const WatchWaiter&) = delete;
  WatchWaiter& operator=(const WatchWaiter&) = delete;
  Status wait_until(steady::time_point until) override {
    signal_->wait_until(until);
    return {};
  }
  bool on_notify(std::function<void()> notify) override {
    signal_->call_back(std::move(notify));
    return true;
  }

 private:
  Session& session_;
  std::int64_t id_;
  std::shared_ptr<Signal> signal_;
};

struct KeyGrant final : GrantState {
  std::string key;
  std::int64_t lease = 0;  // the lease the key is on
};

// A waiting thread's place in one lock's queue.
struct Contender {
  std::string name;
  std::uint64_t order = 0;  // when it started waiting, within this client
  std::shared_ptr<Signal> signal = std::make_shared<Signal>();
  std::string key;          // ours; empty: none yet
  std::int64_t lease = 0;   // the lease our key is on
  std::int64_t revision = 0;  // our key's create revision
  std::int64_t watch_id = 0;  // the watch on the key before ours; 0: none
  std::shared_ptr<Signal> deleted;  // that key's deletion
  bool granted = false;
};

class EtcdBackend final : public Backend, public LockDriver {
 public:
  explicit EtcdBackend(Config config) : session_(std::move(config), events()) {}

  Status start() { return session_.start(); }

  Status validate_name(std::string_view name) const override {
    const std::string what = "name '" + std::string(name) + "'";
    for (auto segment : path_segments(name))
      if (Status s = check_segment(segment, what); !s) return s;
    return {};
  }

  bool supports_fair() const override { return true; }  // the queue is always in create-revision order
  bool supports_election() const override { return true; }
  LockDriver& locks() override { return *this; }
  bool waits_in_queue() const override { return true; }

  Status ping() override {
    auto r = session_.range(one_key(session_.config().prefix), steady::now() + session_.config().op_timeout, "ping");
    return r ? Status() : r.status();
  }

  Result<Attempt> try_acquire(const LockRequest& request) override {
    if (request.kind != LockKind::mutex && request.kind != LockKind::latch)
      return Status(errc::unsupported, "etcd: only Mutex, MultiLock and Election are implemented on etcd:// yet");
    const auto sent = steady::now();
    const auto deadline = sent + session_.config().op_timeout;
    const std::string step = "acquiring '" + request.name + "'";
    auto c = find(request.owner, request.name);  // null: a try_lock that must leave no trace

    // Waiting on the key before ours, which has not gone, on a lease still
    // live: nothing has changed.
    if (c && c->watch_id != 0 && !c->deleted->fired() && session_.lease_deadline(c->lease) > sent)
      return Attempt(Busy{});

    auto lease = session_.lease(deadline, step);
    if (!lease) return lease.status();
    if (!take_slot(request.name, request.owner)) return Attempt(Busy{});  // woken when it frees

    const std::string prefix = lock_prefix(session_.config(), request.name);
    const std::string key = prefix + hex(lease->id);
    if (c && c->key == key) return look_again(request, *c, *lease, sent, deadline, step);
    if (c) forget_watch(*c);

    // Our key if absent (with the lease), and the first key by creation.
    pb::TxnRequest t;
    *t.add_compare() = created_at(key, 0);
    auto* put = t.add_success()->mutable_request_put();
    put->set_key(key);
    put->set_value(request.data);
    put->set_lease(lease->id);
    *t.add_success()->mutable_request_range() = first_created(prefix);
    *t.add_failure()->mutable_request_range() = one_key(key);
    *t.add_failure()->mutable_request_range() = first_created(prefix);
    auto r = session_.txn(t, deadline, step);
    if (!r) {
      if (!c) free_slot(request.name, request.owner);
      return r.status();
    }
    std::int64_t revision = r->header().revision();
    if (!r->succeeded()) {
      const auto& mine = r->responses(0).response_range();
      if (mine.kvs_size() == 0) return Status(errc::internal, "etcd: " + step + ": our key vanished inside a Txn");
      revision = mine.kvs(0).create_revision();
    }
    const auto& first = r->responses(1).response_range();
    const bool ours = first.kvs_size() > 0 && first.kvs(0).create_revision() == revision;
    if (ours) {
      if (c) {
        c->key = key;
        c->lease = lease->id;
        c->revision = revision;
      }
      return grant(request, c.get(), key, revision, *lease, sent, deadline, step);
    }
    if (!c) {
      // try_lock: one look, then gone.
      auto gone = delete_if_created_at(session_, key, revision, deadline, step);
      free_slot(request.name, request.owner);
      if (!gone) return gone.status();
      return Attempt(Busy{});
    }
    c->key = key;
    c->lease = lease->id;
    c->revision = revision;
    return look_again(request, *c, *lease, sent, deadline, step);
  }

  std::unique_ptr<Waiter> watch(const LockRequest& request) override {
    auto c = std::make_shared<Contender>();
    c->name = request.name;
    std::pair<std::string, std::string> key{request.owner, request.name};
    {
      std::lock_guard lk(mu_);
      c->order = next_order_++;
      contenders_[key] = c;
    }
    session_.add_waiter(c->signal);
    return std::make_unique<QueueWaiter<EtcdBackend, Contender>>(*this, std::move(key), std::move(c));
  }

  // A waiter leaves: its key goes (unless it became the lock), and so does
  // its claim on the name within this client.
  void leave(const std::pair<std::string, std::string>& key, Contender& c) {
    std::shared_ptr<Signal> next;
    {
      std::lock_guard lk(mu_);
      contenders_.erase(key);
      // It may have been woken for a slot it now won't take: pass that on.
      if (!slots_.contains(c.name)) next = next_local(c.name, key.first);
    }
    if (next) next->notify();
    session_.remove_waiter(c.signal);
    forget_watch(c);
    if (c.granted) return;
    if (!c.key.empty()) {
      // Gone before the caller returns, as a try_lock_for that timed out
      // must leave no trace; if the cluster can't be reached the key goes
      // with the lease.
      (void)delete_if_created_at(session_, c.key, c.revision, steady::now() + session_.config().op_timeout,
                                 "giving up on '" + c.name + "'");
    }
    free_slot(c.name, key.first);
  }

  Status release(const LockRequest& request, Grant& grant) override {
    const auto& g = static_cast<KeyGrant&>(*grant.state);
    const std::string step = "unlock '" + request.name + "'";
    auto gone = delete_if_created_at(session_, g.key, static_cast<std::int64_t>(grant.token),
                                     steady::now() + session_.config().op_timeout, step);
    free_slot(request.name, request.owner);
    if (!gone) return gone.status();
    if (!*gone)
      return Status(errc::lock_lost, "etcd: " + step + ": our key is gone (force-released, or its lease expired)");
    return {};
  }

  // One Txn reads back every key of the batch (up to etcd's 128 operations
  // per Txn): one round trip per batch. The client's lease itself is kept
  // alive by the session's keepalive stream.
  void renew(std::span<Renewal> batch) override {
    constexpr std::size_t max_ops = 128;
    for (std::size_t from = 0; from < batch.size(); from += max_ops) {
      const auto part = batch.subspan(from, std::min(max_ops, batch.size() - from));
      const auto sent = steady::now();
      pb::TxnRequest t;
      for (const Renewal& r : part)
        *t.add_success()->mutable_request_range() = one_key(static_cast<KeyGrant&>(*r.grant->state).key);
      auto read = session_.txn(t, sent + session_.config().op_timeout, "renewing locks");
      for (std::size_t i = 0; i < part.size(); ++i) {
        Renewal& r = part[i];
        const auto& g = static_cast<KeyGrant&>(*r.grant->state);
        const std::string step = "etcd: renewing '" + r.request->name + "'";
        if (!read) {
          r.outcome = read.status();
          continue;
        }
        const auto& kvs = read->responses(static_cast<int>(i)).response_range().kvs();
        const auto lease_until = session_.lease_deadline(g.lease);
        if (kvs.empty() || kvs[0].create_revision() != static_cast<std::int64_t>(r.grant->token) ||
            kvs[0].lease() != g.lease) {
          r.outcome = Status(errc::lock_lost, step + ": our key is gone (force-released, or its lease expired)");
        } else if (lease_until <= sent) {
          r.outcome = Status(errc::lock_lost, step + ": the client's lease was lost");
        } else {
          r.grant->valid_until = std::min(sent + r.request->lease, lease_until);
          r.outcome = {};
        }
      }
    }
  }

  // Deletes the holder's key (the first by creation); waiters keep their places.
  Status force_release(std::string_view name) override {
    const auto deadline = steady::now() + session_.config().op_timeout;
    const std::string step = "force-releasing '" + std::string(name) + "'";
    auto first = session_.range(first_created(lock_prefix(session_.config(), name)), deadline, step);
    if (!first) return first.status();
    if (first->kvs_size() == 0) return {};
    auto gone = delete_if_created_at(session_, first->kvs(0).key(), first->kvs(0).create_revision(), deadline, step);
    return gone ? Status() : gone.status();
  }

  // The leader: the first key by creation, and its value (the leader's
  // id). Observers watch that key (deleted, or its value proclaimed anew:
  // no key created later can come before it), or with no leader the whole
  // prefix.
  Result<Holder> holder(std::string_view name, LockKind kind, bool watch) override {
    if (kind != LockKind::latch) return Status(errc::unsupported, "etcd: holder() is for elections");
    const std::string step = "reading the leader of '" + std::string(name) + "'";
    const std::string prefix = lock_prefix(session_.config(), name);
    auto first = session_.range(first_created(prefix), steady::now() + session_.config().op_timeout, step);
    if (!first) return first.status();
    Holder out;
    std::string key = prefix, end = range_end(prefix);
    if (first->kvs_size() > 0) {
      out.data = first->kvs(0).value();
      key = first->kvs(0).key();
      end.clear();
    }
    if (watch) {
      auto signal = std::make_shared<Signal>();
      auto id = session_.watch(key, end, first->header().revision() + 1, false, signal);
      if (!id) return id.status();
      out.change = std::make_unique<WatchWaiter>(session_, *id, std::move(signal));
    }
    return out;
  }

  // Every contender key under the prefix; per lock the first by creation
  // holds it, with its lease's time to live.
  Result<std::vector<LockInfo>> list(std::string_view prefix) override {
    const auto deadline = steady::now() + session_.config().op_timeout;
    constexpr std::string_view step = "listing locks";
    const std::string root = session_.config().prefix + "/";
    pb::RangeRequest r;
    r.set_key(root + std::string(prefix));
    r.set_range_end(range_end(root + std::string(prefix)));
    r.set_limit(100'000);
    auto all = session_.range(r, deadline, step);
    if (!all) return all.status();
    struct Held {
      std::int64_t revision = 0;
      std::int64_t lease = 0;
      std::string value;  // an election's leader id; empty for a mutex
    };
    std::map<std::string, Held> holders;
    for (const auto& kv : all->kvs()) {
      const auto slash = kv.key().rfind('/');
      if (slash == std::string::npos || slash < root.size()) continue;
      const std::string name = kv.key().substr(root.size(), slash - root.size());
      auto [it, added] = holders.try_emplace(name, Held{kv.create_revision(), kv.lease(), kv.value()});
      if (!added && kv.create_revision() < it->second.revision)
        it->second = Held{kv.create_revision(), kv.lease(), kv.value()};
    }
    std::map<std::int64_t, std::optional<milliseconds>> ttl;
    for (const auto& [name, h] : holders) ttl.try_emplace(h.lease);
    for (auto& [lease, left] : ttl) {
      if (lease == 0) continue;
      auto live = session_.time_to_live(lease, deadline, step);
      if (!live) return live.status();
      if (live->ttl() > 0) left = std::chrono::seconds(live->ttl());
    }
    std::vector<LockInfo> out;
    // A mutex's keys are empty; an election's hold the candidates' ids.
    for (const auto& [name, h] : holders)
      out.push_back(LockInfo{name, (h.value.empty() ? "" : "'" + h.value + "', ") + "lease " + hex(h.lease),
                             static_cast<std::uint64_t>(h.revision), ttl[h.lease], h.value.empty() ? "mutex" : "leader"});
    return out;
  }

 private:
  std::shared_ptr<Contender> find(const std::string& owner, const std::string& name) {
    std::lock_guard lk(mu_);
    auto it = contenders_.find({owner, name});
    return it == contenders_.end() ? nullptr : it->second;
  }

  // Within this client, one owner at a time has a key under a name.
  bool take_slot(const std::string& name, const std::string& owner) {
    std::lock_guard lk(mu_);
    auto [it, added] = slots_.try_emplace(name, owner);
    return added || it->second == owner;
  }

  // Frees the name for this client's other owners and wakes the one that
  // has waited longest (one, not all: the others wait for their turn).
  void free_slot(const std::string& name, const std::string& owner) {
    std::shared_ptr<Signal> next;
    {
      std::lock_guard lk(mu_);
      auto it = slots_.find(name);
      if (it == slots_.end() || it->second != owner) return;
      slots_.erase(it);
      next = next_local(name, owner);
    }
    if (next) next->notify();
  }

  // The signal of the earliest contender for `name` other than `owner`'s.
  std::shared_ptr<Signal> next_local(const std::string& name, const std::string& owner) {
    const Contender* next = nullptr;
    for (const auto& [key, c] : contenders_)
      if (key.second == name && key.first != owner && (!next || c->order < next->order)) next = c.get();
    return next ? next->signal : nullptr;
  }

  void forget_watch(Contender& c) {
    if (c.watch_id != 0) session_.unwatch(std::exchange(c.watch_id, 0));
  }

  // Our key exists (as far as we know): is it first now? If not, watch the
  // key created last before it.
  Result<Attempt> look_again(const LockRequest& request, Contender& c, const Lease& lease, steady::time_point sent,
                             steady::time_point deadline, const std::string& step) {
    forget_watch(c);
    const std::string prefix = lock_prefix(session_.config(), request.name);
    pb::TxnRequest t;
    *t.add_success()->mutable_request_range() = one_key(c.key);
    *t.add_success()->mutable_request_range() = first_created(prefix, true, c.revision);
    auto r = session_.txn(t, deadline, step);
    if (!r) return r.status();
    const auto& mine = r->responses(0).response_range();
    if (mine.kvs_size() == 0 || mine.kvs(0).create_revision() != c.revision) {
      // Our key is gone (deleted by someone, or with an expired lease):
      // take a new place at once.
      c.key.clear();
      c.signal->notify();
      return Attempt(Busy{});
    }
    const auto& before = r->responses(1).response_range();
    if (before.kvs_size() == 0) return grant(request, &c, c.key, c.revision, lease, sent, deadline, step);
    c.deleted = std::make_shared<Signal>();
    c.deleted->call_back([s = c.signal] { s->notify(); });
    auto id = session_.watch(before.kvs(0).key(), "", r->header().revision() + 1, true, c.deleted);
    if (!id) return id.status();
    c.watch_id = *id;
    return Attempt(Busy{});
  }

  Result<Attempt> grant(const LockRequest& request, Contender* c, const std::string& key, std::int64_t revision,
                        const Lease& lease, steady::time_point sent, steady::time_point deadline,
                        const std::string& step) {
    Grant g;
    g.token = static_cast<std::uint64_t>(revision);
    auto state = std::make_unique<KeyGrant>();
    state->key = key;
    state->lease = lease.id;
    if (request.mode == LeaseMode::fixed) {
      // The key moves onto a lease of its own that nobody renews (a Put
      // keeps its create revision, so the token stays).
      const auto seconds = std::chrono::ceil<std::chrono::seconds>(request.lease).count();
      auto own = session_.grant(seconds, deadline, step);
      if (!own) return own.status();
      pb::TxnRequest t;
      *t.add_compare() = created_at(key, revision);
      auto* put = t.add_success()->mutable_request_put();
      put->set_key(key);
      put->set_value(request.data);
      put->set_lease(own->id());
      auto moved = session_.txn(t, deadline, step);
      if (!moved) return moved.status();
      if (!moved->succeeded())
        return Status(errc::lock_lost, "etcd: " + step + ": our key went (force-released) as it was granted");
      state->lease = own->id();
      g.valid_until = sent + request.lease;
    } else {
      g.valid_until = std::min(sent + request.lease, session_.lease_deadline(lease.id));
      g.dropped = lease.dropped;
    }
    g.state = std::move(state);
    if (c) c->granted = true;
    return Attempt(std::move(g));
  }

  Session session_;
  std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<Contender>> contenders_;  // (owner, name)
  std::map<std::string, std::string> slots_;  // name -> the owner with a key under it
  std::uint64_t next_order_ = 0;
};

}  // namespace
}  // namespace etcd

Result<std::unique_ptr<Backend>> open_etcd_backend(const Url& url, const ClientOptions& options) {
  auto config = etcd::parse_config(url, options);
  if (!config) return config.status();
  auto backend = std::make_unique<etcd::EtcdBackend>(std::move(*config));
  if (Status s = backend->start(); !s) return s;
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace dlock::detail
