// The etcd:// backend: Mutex on etcd, the layout of etcd's concurrency.Mutex,
// so a dlock mutex, `etcdctl lock` and a Go service's Mutex on the same name
// exclude each other and share one queue. Election, SharedMutex and
// Semaphore are the same queue with other keys (Queue, below); Counter,
// Latch (counters.h) and Barrier (barrier.h) have files of their own.
//
//   <prefix>/<name>/<lease id, lowercase hex>   one key per contender, value
//                                               empty, attached to the
//                                               contender's lease; the key with
//                                               the lowest create revision
//                                               holds the lock
//   <prefix>.paths/<escaped name>/<lease hex>   the same for a name with '/',
//                                               escaped into one segment
//                                               ('%' as %25, '/' as %2F), so
//                                               that "a/b" is not inside the
//                                               range of "a" (config.h
//                                               name_range)
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
#include "backends/etcd/barrier.h"
#include "backends/etcd/config.h"
#include "backends/etcd/counters.h"
#include "backends/etcd/errors.h"
#include "backends/etcd/keys.h"
#include "backends/etcd/replies.h"
#include "backends/etcd/session.h"

#include "core/pending_replies.h"
#include "core/queue_waiter.h"
#include "core/registry.h"
#include "core/validate.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <set>
#include <tuple>
#include <utility>

namespace dlock::detail {
namespace etcd {
namespace {

using std::chrono::milliseconds;

// Reads the first (or last) `limit` keys of a prefix by create revision;
// `below`: only keys created before that revision.
pb::RangeRequest first_created(const std::string& prefix, bool last = false, std::int64_t below = 0,
                               std::int64_t limit = 1) {
  pb::RangeRequest r;
  r.set_key(prefix);
  r.set_range_end(range_end(prefix));
  r.set_sort_target(pb::RangeRequest::CREATE);
  r.set_sort_order(last ? pb::RangeRequest::DESCEND : pb::RangeRequest::ASCEND);
  r.set_limit(limit);
  if (below > 0) r.set_max_create_revision(below - 1);
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

// A release that found our key gone.
Status key_gone(const std::string& step) {
  return Status(errc::lock_lost, "etcd: " + step + ": our key is gone (force-released, or its lease expired)");
}

// Deletes `key` if it is still the one created at `revision` (the Txn;
// its `succeeded`: whether it was).
pb::TxnRequest delete_if_created_at_request(const std::string& key, std::int64_t revision) {
  pb::TxnRequest t;
  *t.add_compare() = created_at(key, revision);
  t.add_success()->mutable_request_delete_range()->set_key(key);
  return t;
}

// The same, run: true if it was.
Result<bool> delete_if_created_at(Session& session, const std::string& key, std::int64_t revision,
                                  steady::time_point deadline, std::string_view step) {
  auto r = session.txn(delete_if_created_at_request(key, revision), deadline, step);
  if (!r) return r.status();
  return r->succeeded();
}

// Where one request waits: every kind is a queue of keys ordered by create
// revision, and a contender holds once fewer than `room` of the keys under
// `blockers` were created before its own.
//
//   mutex, election  <prefix>/<name>/<lease hex>             (etcd's concurrency layout)
//   write            <prefix>.rwlock/<name>/write/<id>       (etcd's recipes RWMutex:
//   read             <prefix>.rwlock/<name>/read/<id>         a writer waits for every key
//                                                             before it, a reader only for
//                                                             writers)
//   permit           <prefix>.semaphore/<name>/<id>           the first N keys hold the N
//                                                             permits; the value is N
//
// (<root>/<name>/ is config.h's name_range: a name with '/' is
// <root>.paths/<escaped name>/, so no name's range holds another's keys.)
// <id> is the lease (hex), '-', the owner: one key per owner, so that two
// readers or two permits of one client are two keys. A mutex's key is per
// lease (etcdctl's and Go's layout); within a client its owners take turns
// (a slot per name).
struct Queue {
  std::string key;       // ours
  std::string value;     // stored in it
  std::string blockers;  // the prefix of the keys that may keep us waiting
  std::int64_t room = 1;
  bool per_lease = true;  // the key is the lease's (mutex, election): owners of one client take turns
};

Queue queue_of(const Config& config, const LockRequest& request, std::int64_t lease) {
  Queue q;
  const std::string id = hex(lease) + "-" + request.owner;
  switch (request.kind) {
    case LockKind::write:
    case LockKind::read: {
      const std::string range = kind_prefix(config, "rwlock", request.name);
      const bool write = request.kind == LockKind::write;
      q.key = range + (write ? "write/" : "read/") + id;
      q.blockers = write ? range : range + "write/";
      q.per_lease = false;
      break;
    }
    case LockKind::permit:
      q.blockers = kind_prefix(config, "semaphore", request.name);
      q.key = q.blockers + id;
      q.value = std::to_string(request.permits);
      q.room = request.permits;
      q.per_lease = false;
      break;
    default:
      q.blockers = lock_prefix(config, request.name);
      q.key = q.blockers + hex(lease);
      q.value = request.data;
      break;
  }
  return q;
}

// Contenders of one client are told apart by owner and by this: a mutex
// and an election of one name share their keys; the other kinds don't.
std::string contender_id(const LockRequest& request) {
  if (request.kind == LockKind::mutex || request.kind == LockKind::leader) return request.name;
  return std::string(kind_name(request.kind)) + '\n' + request.name;
}

struct KeyGrant final : GrantState {
  std::string key;
  std::int64_t lease = 0;  // the lease the key is on
  steady::time_point seen{};  // when the key was last seen ours (sent time of that read or of its create)
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
  bool per_lease = true;  // Queue::per_lease: it takes the client's slot for the name
  bool granted = false;
};

class EtcdBackend final : public Backend, public LockDriver {
 public:
  explicit EtcdBackend(Config config) : session_(std::move(config), events()) {}
  // No release's answer may come once the state it updates has gone.
  ~EtcdBackend() override { session_.end_async(); }

  Status start() { return session_.start(); }

  Status validate_name(std::string_view name) const override {
    const std::string what = "name '" + std::string(name) + "'";
    for (auto segment : path_segments(name))
      if (Status s = check_segment(segment, what); !s) return s;
    return {};
  }

  bool supports_fair() const override { return true; }  // the queue is always in create-revision order
  bool supports_election() const override { return true; }
  bool supports_shared() const override { return true; }
  bool supports_permits() const override { return true; }
  LockDriver& locks() override { return *this; }
  // Every key of the client is on its lease: a dead client's go this long
  // after its last keepalive.
  std::optional<std::chrono::milliseconds> session_timeout() const override { return session_.lease_ttl(); }
  CounterDriver* counters() override { return &counters_; }
  LatchDriver* latches() override { return &latches_; }
  BarrierDriver* barriers() override { return &barriers_; }
  bool waits_in_queue() const override { return true; }

  Status ping() override {
    auto r = session_.range(one_key(session_.config().prefix), steady::now() + session_.config().op_timeout, "ping");
    return r ? Status() : r.status();
  }

  Result<Attempt> try_acquire(const LockRequest& request) override {
    if (request.kind == LockKind::member)
      return Status(errc::unsupported, "etcd: barrier members are not leased locks on etcd://");
    const auto sent = steady::now();
    const auto deadline = sent + session_.config().op_timeout;
    const std::string step = "acquiring " + std::string(kind_name(request.kind)) + " '" + request.name + "'";
    auto c = find(request.owner, contender_id(request));  // null: a try_lock that must leave no trace

    // Waiting on the key before ours, which has not gone, on a lease still
    // live: nothing has changed.
    if (c && c->watch_id != 0 && !c->deleted->fired() && session_.lease_deadline(c->lease) > sent)
      return Attempt(Busy{});

    // This thread's releases first: its own key under the name may still
    // be there, and the name its own within the client, until they are answered.
    if (Status s = session_.await_own(deadline, step); !s) return s;
    auto lease = session_.lease(deadline, step);
    if (!lease) return lease.status();
    const Queue q = queue_of(session_.config(), request, lease->id);
    if (q.per_lease && !take_slot(request.name, request.owner)) return Attempt(Busy{});  // woken when it frees
    const std::string& key = q.key;
    if (c && c->key == key) return look_again(request, *c, q, *lease, sent, deadline, step);
    if (c) forget_watch(*c);
    if (Status settled = settle_doubt(key, deadline, step); !settled) {
      if (!c && q.per_lease) free_slot(request.name, request.owner);
      return settled;
    }

    // Our key if absent (with the lease), and the first `room` keys that
    // may block it, by creation. With room for one, where ours is one of
    // them (not a reader's), also the two created last: ours (this Txn's)
    // and the one before it, which a waiter watches.
    pb::TxnRequest t;
    *t.add_compare() = created_at(key, 0);
    auto* put = t.add_success()->mutable_request_put();
    put->set_key(key);
    put->set_value(q.value);
    put->set_lease(lease->id);
    *t.add_success()->mutable_request_range() = first_created(q.blockers, false, 0, q.room);
    const bool reads_predecessor = q.room == 1 && c && key.starts_with(q.blockers);
    if (reads_predecessor) *t.add_success()->mutable_request_range() = first_created(q.blockers, true, 0, 2);
    *t.add_failure()->mutable_request_range() = one_key(key);
    *t.add_failure()->mutable_request_range() = first_created(q.blockers, false, 0, q.room);
    auto r = session_.txn(t, deadline, step);
    if (!r) {
      if (!c && q.per_lease) free_slot(request.name, request.owner);
      return r.status();
    }
    auto read = read_acquire(*r, reads_predecessor, step);
    if (!read) {
      // Not trusted, so not known: our key may be there (doubtful, as after
      // an unanswered delete), and the name is not ours.
      if (!c && q.per_lease) free_slot(request.name, request.owner);
      return read.status();
    }
    const std::int64_t revision = read->revision;
    const auto& first = *read->first;
    if (request.kind == LockKind::permit && first.kvs_size() > 0 && first.kvs(0).value() != q.value) {
      // The oldest permit out declares the count; ours differs.
      (void)delete_ours(key, revision, deadline, step);
      if (c) c->key.clear();
      return Status(errc::invalid_argument, "etcd: " + step + ": semaphore '" + request.name + "' has " +
                                                first.kvs(0).value() + " permits (as its holders declared), not " +
                                                q.value);
    }
    // Fewer than `room` blockers were created before ours.
    const bool ours = first.kvs_size() < q.room || first.kvs(static_cast<int>(q.room) - 1).create_revision() >= revision;
    if (ours) {
      if (c) {
        c->key = key;
        c->lease = lease->id;
        c->revision = revision;
      }
      return grant(request, c.get(), q, revision, *lease, sent, deadline, step);
    }
    if (!c) {
      // try_lock: one look, then gone.
      auto gone = delete_ours(key, revision, deadline, step);
      if (q.per_lease) free_slot(request.name, request.owner);
      if (!gone) return gone.status();
      return Attempt(Busy{});
    }
    c->key = key;
    c->lease = lease->id;
    c->revision = revision;
    if (read->last_two) {
      // Ours was just made, so the Txn's read is as look_again's would be:
      // wait behind the key created last before it, without reading again.
      const auto& last = *read->last_two;
      if (last.kvs_size() == 2 && last.kvs(0).create_revision() == revision)
        return wait_behind(*c, q, last.kvs(1), r->header().revision(), deadline, step);
    }
    return look_again(request, *c, q, *lease, sent, deadline, step);
  }

  std::unique_ptr<Waiter> watch(const LockRequest& request) override {
    auto c = std::make_shared<Contender>();
    c->name = request.name;
    c->per_lease = request.kind == LockKind::mutex || request.kind == LockKind::leader;
    std::pair<std::string, std::string> key{request.owner, contender_id(request)};
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
      if (c.per_lease && !slots_.contains(c.name)) next = next_local(c.name, key.first);
    }
    if (next) next->notify();
    session_.remove_waiter(c.signal);
    forget_watch(c);
    if (c.granted) return;
    if (!c.key.empty()) {
      // Gone before the caller returns, as a try_lock_for that timed out
      // must leave no trace; if the cluster can't be reached the key goes
      // with the lease.
      (void)delete_ours(c.key, c.revision, steady::now() + session_.config().op_timeout,
                        "giving up on '" + c.name + "'");
    }
    if (c.per_lease) free_slot(c.name, key.first);
  }

  Status release(const LockRequest& request, Grant& grant) override {
    const auto& g = static_cast<KeyGrant&>(*grant.state);
    const std::string step = "releasing " + std::string(kind_name(request.kind)) + " '" + request.name + "'";
    auto gone = delete_ours(g.key, static_cast<std::int64_t>(grant.token), steady::now() + session_.config().op_timeout,
                            step);
    if (request.kind == LockKind::mutex || request.kind == LockKind::leader) free_slot(request.name, request.owner);
    if (!gone) return gone.status();
    return *gone ? Status() : key_gone(step);
  }

  // The same delete, sent without waiting (Session::txn_async orders this
  // thread's next call behind it). Sent again while no member answers, for
  // as long as the key can live on the client's lease (its TTL): a release
  // given up would hold the lock for as long as the client runs. The name
  // stays this owner's within the client until the answer: another owner's
  // key under it would be the same key (it is the lease's), found still there.
  void release_async(const LockRequest& request, Grant& grant, std::function<void(Status)> done) override {
    const auto& g = static_cast<KeyGrant&>(*grant.state);
    std::string step = "releasing " + std::string(kind_name(request.kind)) + " '" + request.name + "'";
    const bool per_lease = request.kind == LockKind::mutex || request.kind == LockKind::leader;
    const auto revision = static_cast<std::int64_t>(grant.token);
    const auto give_up = steady::now() + std::max<steady::duration>(session_.config().op_timeout, session_.lease_ttl());
    auto answered = [this, key = g.key, revision, name = request.name, owner = request.owner, per_lease, step,
                     done = unanswered_.track(std::move(done))](Result<pb::TxnResponse> r, bool resent) {
      if (!r) {
        std::lock_guard lk(mu_);
        doubtful_[key] = revision;
      }
      if (per_lease) free_slot(name, owner);
      // Found gone after a send whose answer was lost: that send deleted it.
      done(!r ? r.status() : r->succeeded() || resent ? Status() : key_gone(step));
    };
    session_.txn_async(delete_if_created_at_request(g.key, revision), give_up, step, std::move(answered));
  }

  void flush(steady::time_point deadline) override { unanswered_.close(deadline); }

  // One Txn reads back every key of the batch (up to etcd's 128 operations
  // per Txn): one round trip per batch. The client's lease itself is kept
  // alive by the session's keepalive stream.
  //
  // The read is linearizable: it needs a leader, so during an election it
  // waits (or fails) until one is elected — longer than the third of the
  // validity a renewal starts with. The lock is as valid as the lease its
  // key is on, which the keepalive stream goes on renewing meanwhile, so:
  // the read is given up before the holds' current deadlines, and a read
  // that cannot reach the cluster carries them forward to the lease's
  // (keepalive-confirmed) deadline, up to the lock's lease or the client's
  // ttl, the shorter, after the key was last seen (a force_unlock done
  // meanwhile goes unseen no longer than that). The read is retried; a key found gone then is reported lost, and
  // a lease found lost drops every hold on it at once (Grant::dropped).
  void renew(std::span<Renewal> batch) override {
    constexpr std::size_t max_ops = 128;
    for (std::size_t from = 0; from < batch.size(); from += max_ops) {
      const auto part = batch.subspan(from, std::min(max_ops, batch.size() - from));
      const auto sent = steady::now();
      pb::TxnRequest t;
      auto due = steady::time_point::max();  // the earliest deadline among the batch's holds
      for (const Renewal& r : part) {
        *t.add_success()->mutable_request_range() = one_key(static_cast<KeyGrant&>(*r.grant->state).key);
        due = std::min(due, r.grant->valid_until);
      }
      // Back before `due`, with room for the lease keeper to take the
      // outcome in (but always some time for the read itself).
      constexpr std::chrono::milliseconds room{200}, least{100};
      const auto deadline = std::min(sent + session_.config().op_timeout,
                                     due - sent > room + least ? due - room : sent + least);
      auto reply = session_.txn(t, deadline, "renewing locks");
      auto read = reply ? read_ranges(*reply, part.size(), "renewing locks")
                        : Result<std::vector<const pb::RangeResponse*>>(reply.status());
      const steady::duration ttl = session_.lease_ttl();
      for (std::size_t i = 0; i < part.size(); ++i) {
        Renewal& r = part[i];
        auto& g = static_cast<KeyGrant&>(*r.grant->state);
        const std::string step = "etcd: renewing '" + r.request->name + "'";
        if (!read) {
          r.outcome = read.status();
          if (r.outcome.code() == errc::unavailable)
            r.grant->valid_until = std::max(r.grant->valid_until,
                                            std::min(g.seen + std::min<steady::duration>(r.request->lease, ttl),
                                                     session_.lease_deadline(g.lease)));
          continue;
        }
        const auto& kvs = (*read)[i]->kvs();
        const auto lease_until = session_.lease_deadline(g.lease);
        if (kvs.empty() || kvs[0].create_revision() != static_cast<std::int64_t>(r.grant->token) ||
            kvs[0].lease() != g.lease) {
          r.outcome = Status(errc::lock_lost, step + ": our key is gone (force-released, or its lease expired)");
        } else if (lease_until <= sent) {
          r.outcome = Status(errc::lock_lost, step + ": the client's lease was lost");
        } else {
          r.grant->valid_until = std::min(sent + r.request->lease, lease_until);
          g.seen = sent;
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
    if (kind != LockKind::leader) return Status(errc::unsupported, "etcd: holder() is for elections");
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
      const auto deadline = steady::now() + session_.config().op_timeout;
      auto id = session_.watch(
          key, end, false, signal, first->header().revision(),
          [&]() -> Result<bool> {
            auto now = session_.range(first_created(prefix), deadline, step);
            if (!now) return now.status();
            if (now->kvs_size() != first->kvs_size()) return true;
            return now->kvs_size() > 0 && (now->kvs(0).key() != first->kvs(0).key() ||
                                           now->kvs(0).mod_revision() != first->kvs(0).mod_revision());
          },
          deadline);
      if (!id) return id.status();
      out.change = std::make_unique<WatchWaiter>(session_, *id, std::move(signal));
    }
    return out;
  }

  // Every holder of a lock whose name starts with `prefix`, per lock in
  // token order, with its lease's time to live: a mutex's (election's)
  // first key by creation, a read-write lock's writer or the readers before
  // its first writer, a semaphore's first N keys.
  Result<std::vector<LockInfo>> list(std::string_view prefix) override {
    const auto deadline = steady::now() + session_.config().op_timeout;
    constexpr std::string_view step = "listing locks";
    struct Entry {
      std::int64_t revision = 0;
      std::int64_t lease = 0;
      std::string kind;   // mutex, leader, read, write, permit
      std::string value;  // an election's leader id; a permit's count
    };
    // (name, layout) -> its keys: a mutex and a semaphore of one name are two locks.
    std::map<std::pair<std::string, std::string>, std::vector<Entry>> locks;
    // Each layout's keys are <root>/<name>/<id> for a name without '/', and
    // <root>.paths/<escaped name>/<id> for one with '/' (config.h
    // name_range); a read-write lock's have <read|write>/<id>.
    constexpr std::array<std::pair<std::string_view, int>, 3> layouts{{{"", 1}, {"rwlock", 2}, {"semaphore", 1}}};
    for (const auto& [layout, tail] : layouts) {
      for (const bool paths : {false, true}) {
        const auto first_segment = segment_prefix(prefix, paths);
        if (!first_segment) continue;  // no name in this root starts with `prefix`
        const std::string root = session_.config().prefix + (layout.empty() ? "" : "." + std::string(layout)) +
                                 (paths ? ".paths/" : "/");
        pb::RangeRequest r;
        r.set_key(root + *first_segment);
        r.set_range_end(range_end(root + *first_segment));
        r.set_limit(100'000);
        auto all = session_.range(r, deadline, step);
        if (!all) return all.status();
        for (const auto& kv : all->kvs()) {
          // <segment>/<id>, or for a read-write lock <segment>/<read|write>/<id>: anything
          // else is not a key of ours (e.g. etcdctl's lock on <root>/<name>/<more>).
          const std::string_view rest = std::string_view(kv.key()).substr(root.size());
          const auto slash = rest.find('/');
          if (slash == std::string_view::npos) continue;
          const std::string_view after = rest.substr(slash + 1);
          if (std::count(after.begin(), after.end(), '/') != tail - 1) continue;
          auto name = name_of_segment(rest.substr(0, slash), paths);
          if (!name || !name->starts_with(prefix)) continue;
          std::string kind = layout == "rwlock" ? std::string(after.substr(0, after.find('/')))
                             : layout == "semaphore" ? "permit"
                             : kv.value().empty()    ? "mutex"
                                                     : "leader";
          if (layout == "rwlock" && kind != "read" && kind != "write") continue;
          locks[{std::move(*name), std::string(layout)}].push_back(
              Entry{kv.create_revision(), kv.lease(), std::move(kind), kv.value()});
        }
      }
    }
    std::vector<std::pair<std::string, Entry>> held;
    for (auto& [lock, entries] : locks) {
      std::sort(entries.begin(), entries.end(), [](const Entry& x, const Entry& y) { return x.revision < y.revision; });
      std::size_t holders = 1;
      if (lock.second == "rwlock" && entries[0].kind == "read") {
        holders = 0;
        while (holders < entries.size() && entries[holders].kind == "read") ++holders;
      } else if (lock.second == "semaphore") {
        holders = static_cast<std::size_t>(std::max(1L, std::strtol(entries[0].value.c_str(), nullptr, 10)));
      }
      for (std::size_t i = 0; i < std::min(holders, entries.size()); ++i) held.emplace_back(lock.first, entries[i]);
    }
    std::map<std::int64_t, std::optional<milliseconds>> ttl;
    for (const auto& [name, e] : held) ttl.try_emplace(e.lease);
    for (auto& [lease, left] : ttl) {
      if (lease == 0) continue;
      auto live = session_.time_to_live(lease, deadline, step);
      if (!live) return live.status();
      // Another client's lease may be longer than any of ours: what a
      // member says is shown up to a year, and its figure can't overflow
      // the conversion to milliseconds.
      constexpr std::int64_t longest = 366LL * 24 * 3600;
      if (live->ttl() > 0) left = std::chrono::seconds(std::min(live->ttl(), longest));
    }
    std::vector<LockInfo> out;
    for (const auto& [name, e] : held)
      out.push_back(LockInfo{name, (e.kind == "leader" ? "'" + e.value + "', " : "") + "lease " + hex(e.lease),
                             static_cast<std::uint64_t>(e.revision), ttl[e.lease], e.kind});
    std::sort(out.begin(), out.end(),
              [](const LockInfo& x, const LockInfo& y) { return std::tie(x.name, x.token) < std::tie(y.name, y.token); });
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
      if (c->per_lease && key.second == name && key.first != owner && (!next || c->order < next->order))
        next = c.get();
    return next ? next->signal : nullptr;
  }

  void forget_watch(Contender& c) {
    if (c.watch_id != 0) session_.unwatch(std::exchange(c.watch_id, 0));
  }

  // Our key exists (as far as we know): do we hold now? If not, watch the
  // blocker created last before it (one key: a release wakes one waiter);
  // with room for more than one (a semaphore), every blocker's deletion.
  Result<Attempt> look_again(const LockRequest& request, Contender& c, const Queue& q, const Lease& lease,
                             steady::time_point sent, steady::time_point deadline, const std::string& step) {
    forget_watch(c);
    pb::TxnRequest t;
    *t.add_success()->mutable_request_range() = one_key(c.key);
    // (Not count_only: etcd counts the whole range, before the revision filter.)
    *t.add_success()->mutable_request_range() =
        q.room == 1 ? first_created(q.blockers, true, c.revision) : first_created(q.blockers, false, c.revision, q.room);
    auto r = session_.txn(t, deadline, step);
    if (!r) return r.status();
    auto read = read_queue(*r, step);
    if (!read) return read.status();
    const auto& mine = *read->mine;
    if (mine.kvs_size() == 0 || mine.kvs(0).create_revision() != c.revision) {
      // Our key is gone (deleted by someone, or with an expired lease):
      // take a new place at once.
      c.key.clear();
      c.signal->notify();
      return Attempt(Busy{});
    }
    const auto& before = *read->before;
    if (before.kvs_size() < q.room)
      return grant(request, &c, q, c.revision, lease, sent, deadline, step);
    return wait_behind(c, q, before.kvs(0), r->header().revision(), deadline, step);
  }

  // Busy, woken when `blocker` (read at `read_at`; with room for more than
  // one, any of the blockers) is deleted.
  Result<Attempt> wait_behind(Contender& c, const Queue& q, const mvccpb::KeyValue& blocker, std::int64_t read_at,
                              steady::time_point deadline, const std::string& step) {
    c.deleted = std::make_shared<Signal>();
    c.deleted->call_back([s = c.signal] { s->notify(); });
    // Woken by a blocker's deletion. Written to since our read: look again
    // at what we wait for (one key, or whether fewer than `room` are left).
    const std::string watched = q.room == 1 ? blocker.key() : q.blockers;
    const std::string end = q.room == 1 ? std::string() : range_end(q.blockers);
    auto id = session_.watch(
        watched, end, true, c.deleted, read_at,
        [&]() -> Result<bool> {
          if (q.room == 1) {
            auto now = session_.range(one_key(blocker.key()), deadline, step);
            if (!now) return now.status();
            return now->kvs_size() == 0 || now->kvs(0).create_revision() != blocker.create_revision();
          }
          auto now = session_.range(first_created(q.blockers, false, c.revision, q.room), deadline, step);
          if (!now) return now.status();
          return now->kvs_size() < q.room;
        },
        deadline);
    if (!id) return id.status();
    c.watch_id = *id;
    return Attempt(Busy{});
  }

  Result<Attempt> grant(const LockRequest& request, Contender* c, const Queue& q, std::int64_t revision,
                        const Lease& lease, steady::time_point sent, steady::time_point deadline,
                        const std::string& step) {
    const std::string& key = q.key;
    Grant g;
    g.token = static_cast<std::uint64_t>(revision);
    auto state = std::make_unique<KeyGrant>();
    state->key = key;
    state->lease = lease.id;
    state->seen = sent;
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
      put->set_value(q.value);
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

  // Deletes a key of ours if it is still the one created at `revision`.
  // If the cluster does not answer, the delete may still be applied later:
  // the key is then doubtful (settle_doubt).
  Result<bool> delete_ours(const std::string& key, std::int64_t revision, steady::time_point deadline,
                           std::string_view step) {
    auto gone = delete_if_created_at(session_, key, revision, deadline, step);
    if (!gone) {
      std::lock_guard lk(mu_);
      doubtful_[key] = revision;
    }
    return gone;
  }

  // Our key's name is the lease's, so the next acquisition of the name
  // would find the same key and take it as its own (as it must after a
  // create whose answer was lost) — while a delete sent before, unanswered,
  // can still be applied and free the lock under its new holder. So a key
  // whose delete went unanswered is deleted for sure (compared on its
  // creation, so it never touches a newer key) before it is created again.
  Status settle_doubt(const std::string& key, steady::time_point deadline, std::string_view step) {
    std::int64_t revision;
    {
      std::lock_guard lk(mu_);
      auto it = doubtful_.find(key);
      if (it == doubtful_.end()) return {};
      revision = it->second;
    }
    auto gone = delete_if_created_at(session_, key, revision, deadline, step);
    if (!gone) return gone.status();
    std::lock_guard lk(mu_);
    if (auto it = doubtful_.find(key); it != doubtful_.end() && it->second == revision) doubtful_.erase(it);
    return {};
  }

  Session session_;
  PendingReplies unanswered_;  // release_async's answers, for flush()
  CountKeys counter_keys_{session_, kind_root(session_.config(), "counter")};
  CasCounters counters_{counter_keys_};
  Latches latches_{session_};
  Barriers barriers_{session_};
  std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<Contender>> contenders_;  // (owner, name)
  std::map<std::string, std::string> slots_;  // name -> the owner with a key under it
  std::map<std::string, std::int64_t> doubtful_;  // key -> its creation, whose delete went unanswered
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
