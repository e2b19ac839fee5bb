// redis://, redis+unix://, redis+sentinel:// and redis+cluster:// — locks as
// Lua scripts on Redis (scripts.h), every key of a name under its hash tag
// "<prefix>{<name>}:" so that they share one cluster slot. The keys of each
// primitive, the fencing tokens, how waiters queue and are woken, fair mode
// and the limits: docs/backends.md, "redis://". redis+sentinel:// is this
// backend with the master found through the sentinels (sentinel.h), its
// holds re-validated after a failover (revalidate()); redis+cluster:// sends
// each script to the master of its name's slot (cluster.h).
//
// Round trips: an uncontended acquire is one EVALSHA, a release one; a
// renewal batch is one pipeline. Re-entry is core's. Calls from concurrent
// threads share the connections by pipelining (pool.h).
#include "backends/redis/barrier.h"
#include "backends/redis/cluster.h"
#include "backends/redis/config.h"
#include "backends/redis/counters.h"
#include "backends/redis/errors.h"
#include "backends/redis/held_grants.h"
#include "backends/redis/pool.h"
#include "backends/redis/revalidator.h"
#include "backends/redis/sentinel.h"
#include "backends/redis/store.h"
#include "backends/redis/subscriber.h"
#include "core/driver.h"
#include "core/owner_id.h"
#include "core/url.h"

#include <hiredis.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

namespace dlock::detail {
namespace {

using namespace redis;
using std::chrono::milliseconds;

// The keys of one primitive of a name, in the order its scripts expect them.
class Keys {
 public:
  Keys(std::string base, std::initializer_list<std::string_view> suffixes) {
    for (auto suffix : suffixes) keys_.push_back(base + std::string(suffix));
    for (const auto& key : keys_) views_.push_back(key);
  }
  // The views point into keys_' elements, which a move of the vector keeps
  // where they are and a copy would not.
  Keys(Keys&&) noexcept = default;
  Keys(const Keys&) = delete;
  Keys& operator=(const Keys&) = delete;
  std::span<const std::string_view> all() const { return views_; }
  std::span<const std::string_view> first(std::size_t n) const { return std::span(views_).first(n); }
  const std::string& operator[](std::size_t i) const { return keys_[i]; }

 private:
  std::vector<std::string> keys_;
  std::vector<std::string_view> views_;
};

// What each kind of hold is on the server: its keys and scripts.
struct Layout {
  std::initializer_list<std::string_view> suffixes;
  Script acquire, release, renew, leave, force;
  std::size_t renew_keys;  // the first n keys are the renew script's
};

const Layout mutex_layout{{"lock", "queue", "waiters", "since"},
                          Script::acquire, Script::release, Script::renew, Script::leave, Script::force_release, 1};
const Layout leader_layout{{"leader", "leader:queue", "leader:waiters", "leader:since", "leader:observers"},
                           Script::acquire, Script::release, Script::renew, Script::leave, Script::force_release, 1};
const Layout rw_layout{{"rw", "rw:readers", "rw:tokens", "rw:queue", "rw:waiters"},
                       Script::rw_acquire, Script::rw_release, Script::rw_renew, Script::rw_leave, Script::rw_force, 3};
const Layout permit_layout{{"sem", "sem:permits", "sem:tokens", "sem:queue", "sem:waiters"},
                           Script::permit_acquire, Script::permit_release, Script::permit_renew, Script::permit_leave,
                           Script::permit_force, 3};
const Layout member_layout{{"barrier", "barrier:members"},
                           Script::barrier_join, Script::barrier_remove, Script::member_renew, Script::barrier_remove,
                           Script::barrier_remove, 2};

const Layout& layout_of(LockKind kind) {
  switch (kind) {
    case LockKind::leader: return leader_layout;
    case LockKind::read:
    case LockKind::write: return rw_layout;
    case LockKind::permit: return permit_layout;
    case LockKind::member: return member_layout;
    case LockKind::mutex: break;
  }
  return mutex_layout;
}

// An election's observers are told on this tag (not the campaigners' name).
std::string observer_tag(std::string_view name) { return "leader:" + std::string(name); }

// The subscriber slot (and queue entry suffix) of a waiting owner: a
// read-write lock's entries say whether they wait to write or to read.
std::string slot_key(const LockRequest& request) {
  switch (request.kind) {
    case LockKind::write: return request.owner + "|w";
    case LockKind::read: return request.owner + "|r";
    default: return request.owner;
  }
}

// A glob pattern matching `text` literally (for SCAN MATCH).
std::string glob_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

std::string_view text_of(const redisReply* r) {
  return r && r->type == REDIS_REPLY_STRING ? std::string_view(r->str, r->len) : std::string_view();
}

// `config` with the backend's events as where connection changes go.
Config reporting_to(Config config, Events& events) {
  config.events = &events;
  return config;
}

class RedisBackend;

// A thread waiting for a lock: its slot in the subscriber's table; leaving
// (destruction, on every path out of core's loop) takes its entry out of
// the lock's queue.
class RedisWaiter final : public Waiter {
 public:
  RedisWaiter(RedisBackend& backend, std::shared_ptr<Subscriber::Slot> slot, LockKind kind)
      : backend_(backend), slot_(std::move(slot)), kind_(kind) {}
  ~RedisWaiter() override;
  Status wait_until(steady::time_point until) override;
  std::optional<Grant> take_grant() override;
  bool on_notify(std::function<void()> notify) override;

 private:
  RedisBackend& backend_;
  std::shared_ptr<Subscriber::Slot> slot_;
  LockKind kind_;
};

class RedisBackend final : public Backend, public LockDriver {
 public:
  // `locator`: redis+sentinel's (also config.discovery), else nullptr.
  // redis+cluster: config.seeds is not empty.
  RedisBackend(Config config, std::string client_id, std::shared_ptr<MasterLocator> locator)
      : locator_(std::move(locator)),
        held_(locator_ || !config.seeds.empty() ? std::make_shared<HeldGrants>() : nullptr),
        config_(reporting_to(std::move(config), events())),
        client_id_(std::move(client_id)),
        // (redis+cluster: "", the scripts SPUBLISH on the name's channel, Store::channel)
        channel_prefix_(config_.seeds.empty() ? config_.prefix + "client:" : std::string()),
        commands_(config_.seeds.empty() ? std::unique_ptr<Commands>(std::make_unique<Pool>(config_))
                                         : std::make_unique<ClusterRouter>(config_)),
        pool_(*commands_),
        subscriber_(config_, channel_prefix_ + client_id_, {}, dynamic_cast<ClusterRouter*>(commands_.get())),
        store_{config_, pool_, subscriber_, client_id_, channel_prefix_},
        counters_(make_counters(store_)),
        latches_(make_latches(store_)),
        barriers_(make_barriers(store_)) {}

  // The locator's threads and the revalidator use the pool: they stop first.
  ~RedisBackend() override {
    if (locator_) locator_->stop();
    if (revalidator_) revalidator_->stop();
  }

  // Loads the scripts (a command connection) and subscribes (its own);
  // both within op_timeout, so a bad URL or password fails connect().
  // redis+sentinel: the master is found first, and the sentinels are
  // watched for a new one from then on. redis+cluster: the slot map is
  // read first, and the scripts loaded on every master.
  Status start() {
    const auto deadline = steady::now() + config_.op_timeout;
    if (auto* router = dynamic_cast<ClusterRouter*>(commands_.get())) {
      revalidator_ = std::make_unique<Revalidator>([this](const std::set<int>& slots) { return revalidate(slots); });
      router->on_moved([this](const std::set<int>& slots) { revalidator_->request(slots); });
      if (Status s = router->start(deadline); !s) return s;
    }
    if (Status s = pool_.load_all(deadline); !s) return s;
    if (Status s = subscriber_.start(deadline); !s) return s;
    if (locator_) return locator_->start([this] { return revalidate({}); }, deadline);
    return {};
  }

  Status validate_name(std::string_view name) const override {
    if (!name.empty() && name.front() == '}')
      return Status(errc::invalid_argument,
                    "name: must not start with '}' on redis (the key's hash tag {<name>} would be empty, and "
                    "a lock's keys could then land in different cluster slots)");
    return {};
  }

  bool supports_fair() const override { return true; }
  bool supports_shared() const override { return true; }
  bool supports_downgrade() const override { return true; }
  bool supports_election() const override { return true; }
  bool supports_permits() const override { return true; }
  LockDriver& locks() override { return *this; }
  CounterDriver* counters() override { return counters_.get(); }
  LatchDriver* latches() override { return latches_.get(); }
  BarrierDriver* barriers() override { return barriers_.get(); }

  Status ping() override {
    const auto deadline = steady::now() + config_.op_timeout;
    const std::string_view words[] = {"PING"};
    auto reply = pool_.command(words, deadline, "ping");
    return reply ? Status{} : reply.status();
  }

  Result<Attempt> try_acquire(const LockRequest& request) override {
    if (config_.wait_replicas > 0) return try_acquire_replicated(request);
    const AcquireCall call = acquire_call(request);
    auto reply = pool_.eval(layout_of(request.kind).acquire, call.keys.all(), call.views(),
                            call.sent + config_.op_timeout, call.step, call.keys[0]);
    if (!reply) return acquired(call, nullptr, reply.status());
    return acquired(call, reply->get(), {});
  }

  // The script sent now, its reply read by finish(): a quorum's round
  // sends to every node from one thread before it reads any answer. On one
  // server's pool; a cluster, and wait_replicas, ask at once.
  std::unique_ptr<PendingAttempt> start_try_acquire(const LockRequest& request) override {
    auto* pool = dynamic_cast<Pool*>(&pool_);
    if (!pool || config_.wait_replicas > 0) return LockDriver::start_try_acquire(request);
    return std::make_unique<SentAttempt>(*this, *pool, request);
  }

  // wait_replicas: the attempt and a WAIT behind it, on one connection (WAIT
  // counts the replicas that have this connection's writes). A grant fewer
  // replicas acknowledged is released and the attempt fails: a failover to
  // one of the others could lose it. Best effort: an acknowledged write can
  // still be lost (a failover to a replica that did not acknowledge, or one
  // that restarted empty).
  Result<Attempt> try_acquire_replicated(const LockRequest& request) {
    const AcquireCall call = acquire_call(request);
    const Script script = layout_of(request.kind).acquire;
    const std::string replicas = std::to_string(config_.wait_replicas), timeout = ms(config_.wait_timeout);
    const auto deadline = call.sent + config_.op_timeout + config_.wait_timeout;
    for (int attempt = 0;; ++attempt) {
      Batch batch;
      batch.add_eval(pool_.sha(script), call.keys.all(), call.views());
      batch.add({"WAIT", replicas, timeout});
      Replies out = pool_.run(batch, deadline, call.step);
      const redisReply* r = !out.replies.empty() ? out.replies[0].get() : nullptr;
      if (is_noscript(r) && attempt == 0) {
        if (auto loaded = pool_.load(script, deadline); !loaded) return loaded.status();
        continue;
      }
      if (r && r->type == REDIS_REPLY_ERROR)
        return acquired(call, nullptr, to_status(nullptr, r, call.step, call.keys[0]));
      auto result = acquired(call, r, out.failure);
      if (!result || !std::holds_alternative<Grant>(*result)) return result;
      const std::int64_t acks = out.replies.size() > 1 ? integer(out.replies[1].get()) : -1;
      if (acks >= config_.wait_replicas) return result;
      (void)release(request, std::get<Grant>(*result));
      return Status(errc::unavailable,
                    call.step + ": " + (acks < 0 ? std::string("WAIT got no answer") :
                                        std::to_string(acks) + " of the " + replicas + " replicas asked for") +
                        " acknowledged it within wait_timeout (" + timeout + " ms); released it (wait_replicas is "
                        "best effort: see docs/backends.md)");
    }
  }

  // Every attempt in one pipeline: one round trip for them all (the async
  // API's rounds). A script the server forgot is loaded by the one
  // attempt that retries alone. With wait_replicas, one after the other.
  std::vector<Result<Attempt>> try_acquire_many(std::span<const LockRequest* const> requests) override {
    if (config_.wait_replicas > 0) return LockDriver::try_acquire_many(requests);
    std::vector<AcquireCall> calls;
    calls.reserve(requests.size());
    Batch batch;
    for (const LockRequest* request : requests) {
      calls.push_back(acquire_call(*request));
      batch.add_eval(pool_.sha(layout_of(request->kind).acquire), calls.back().keys.all(), calls.back().views());
    }
    Replies replies = pool_.run(batch, steady::now() + config_.op_timeout, "acquiring locks");
    std::vector<Result<Attempt>> out;
    out.reserve(requests.size());
    for (std::size_t i = 0; i < calls.size(); ++i) {
      const redisReply* r = i < replies.replies.size() ? replies.replies[i].get() : nullptr;
      out.push_back(outcome_of(calls[i], r, replies.failure));
    }
    return out;
  }

  std::unique_ptr<Waiter> watch(const LockRequest& request) override {
    // No round trip: the retry core makes right after this queues us.
    // A lock handed to this waiter after it gave up (the wake-up came after
    // it left) is released, or handed on, at once rather than at the end of
    // its lease. (Not waited for: this runs on the subscriber's thread.)
    auto orphaned = [this, request](const Subscriber::Handover& handover) {
      LockRequest held = request;
      held.lease = milliseconds(handover.lease_ms);
      Grant grant;
      grant.token = handover.token;
      release_async(held, grant, [](Status) {});
    };
    // A release may hand a mutex or a leadership straight to its waiter:
    // the handover must carry this wait's secret (Subscriber::Slot). 128
    // random bits, as a client id; if none can be had, no handover is
    // taken (the waiter's next attempt finds the lock its own).
    std::string secret;
    if (request.kind == LockKind::mutex || request.kind == LockKind::leader)
      if (auto random = random_client_id()) secret = std::move(*random);
    return std::make_unique<RedisWaiter>(*this,
                                         subscriber_.add(slot_key(request), request.name, store_.channel(request.name),
                                                         std::move(orphaned), std::move(secret)),
                                         request.kind);
  }

  Status release(const LockRequest& request, Grant& grant) override {
    const auto deadline = steady::now() + config_.op_timeout;
    const std::string what = std::string(kind_name(request.kind)) + " '" + request.name + "'";
    const std::string step = "releasing " + what;
    const ReleaseCall call = release_call(request, grant);
    auto reply = pool_.eval(call.script, call.keys.all(), call.views(), deadline, step, call.keys[0]);
    if (!reply) return reply.status();
    return released(reply->get(), what, step);
  }

  // A mutex's unlock(): the release script is written and not waited for.
  // It runs before anything sent after it on that connection; its answer is
  // read by whichever call reads that connection next (or flush()).
  void release_async(const LockRequest& request, Grant& grant, std::function<void(Status)> done) override {
    if (request.kind != LockKind::mutex) return done(release(request, grant));
    const auto deadline = steady::now() + config_.op_timeout;
    const ReleaseCall call = release_call(request, grant);
    Batch batch;
    batch.add_eval(pool_.sha(call.script), call.keys.all(), call.views());
    pool_.send(batch, deadline,
               [what = "lock '" + request.name + "'", key = call.keys[0], done = std::move(done)](Replies replies) {
                 const std::string step = "releasing " + what;
                 if (!replies.failure.ok()) return done(replies.failure);
                 const redisReply* r = replies.replies.empty() ? nullptr : replies.replies.front().get();
                 if (is_noscript(r))
                   return done(Status(errc::unavailable, "unlock " + what +
                                                             ": the server had forgotten the script (restarted or "
                                                             "flushed); the lease frees the lock"));
                 if (r && r->type == REDIS_REPLY_ERROR) return done(to_status(nullptr, r, step, key));
                 done(released(r, what, step));
               });
  }

  void flush(steady::time_point deadline) override { pool_.flush(deadline); }

  // A release script's answer as a Status.
  static Status released(const redisReply* r, const std::string& what, std::string_view step) {
    const auto done = release_reply_of(r);
    if (!done) return unexpected(step);
    if (*done) return {};
    return Status(errc::lock_lost, "unlock " + what +
                                       ": no longer ours (the lease ran out and it expired or another holder "
                                       "took it, or it was force-released)");
  }

  // All renewals of the batch in one pipeline: one round trip.
  void renew(std::span<Renewal> batch) override {
    if (batch.empty()) return;
    const auto sent = steady::now();
    const auto deadline = sent + config_.op_timeout;
    constexpr std::string_view step = "renewing leases";
    const std::string retention = ms(config_.token_retention);
    std::vector<std::size_t> pending(batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) pending[i] = i;
    for (int attempt = 0; attempt < 2 && !pending.empty(); ++attempt) {
      Batch commands;
      for (std::size_t i : pending) {
        const LockRequest& request = *batch[i].request;
        const Layout& layout = layout_of(request.kind);
        const Keys keys = keys_of(request.name, layout);
        const std::string token = std::to_string(batch[i].grant->token), lease = ms(request.lease);
        std::vector<std::string_view> args = {request.owner, token, lease};
        if (request.kind == LockKind::read || request.kind == LockKind::write)
          args.insert(args.end(), {request.kind == LockKind::write ? "w" : "r", retention});
        else if (request.kind == LockKind::permit)
          args.push_back(retention);
        else if (request.kind == LockKind::member)
          args = {request.owner, lease};
        commands.add_eval(pool_.sha(layout.renew), keys.first(layout.renew_keys), args);
      }
      Replies replies = pool_.run(commands, deadline, step);
      std::vector<std::size_t> noscript;
      for (std::size_t n = 0; n < pending.size(); ++n) {
        Renewal& item = batch[pending[n]];
        if (n >= replies.replies.size()) {
          // The connection is gone: this and every later reply are unknown.
          for (std::size_t m = n; m < pending.size(); ++m) batch[pending[m]].outcome = replies.failure;
          return;
        }
        const redisReply* r = replies.replies[n].get();
        const std::string what = std::string(kind_name(item.request->kind)) + " '" + item.request->name + "'";
        if (is_noscript(r) && attempt == 0) {
          noscript.push_back(pending[n]);
        } else if (r->type == REDIS_REPLY_ERROR) {
          item.outcome = to_status(nullptr, r, step, keys_of(item.request->name, layout_of(item.request->kind))[0]);
        } else if (const auto renewed = renew_reply_of(r); !renewed) {
          item.outcome = unexpected(step);
        } else if (*renewed) {
          item.grant->valid_until = sent + item.request->lease;
          item.outcome = {};
        } else {
          item.outcome = Status(errc::lock_lost, "renewing " + what +
                                                     ": it is gone (lease ran out, server restarted, "
                                                     "force-released) or another holder has it");
        }
      }
      // The server forgot the scripts (restart): load them once, redo those.
      if (!noscript.empty()) {
        std::set<Script> scripts;
        for (std::size_t i : noscript) scripts.insert(layout_of(batch[i].request->kind).renew);
        for (Script s : scripts) {
          if (auto loaded = pool_.load(s, deadline); !loaded) {
            for (std::size_t i : noscript) batch[i].outcome = loaded.status();
            return;
          }
        }
      }
      pending = std::move(noscript);
    }
  }

  // Frees every hold of the name: a mutex, a read-write lock's writer and
  // readers, an election's leader and a semaphore's permits.
  Status force_release(std::string_view name) override {
    const auto deadline = steady::now() + config_.op_timeout;
    const std::string step = "force-releasing '" + std::string(name) + "'";
    const std::string retention = ms(config_.token_retention), tag = observer_tag(name);
    const std::string_view lock_args[] = {retention, channel_prefix_, name, tag};
    const std::string_view held_args[] = {channel_prefix_, name};
    for (const Layout* layout : {&mutex_layout, &leader_layout, &rw_layout, &permit_layout}) {
      const Keys keys = keys_of(name, *layout);
      const bool lock_like = layout->force == Script::force_release;
      auto reply = pool_.eval(layout->force, keys.all(), lock_like ? std::span<const std::string_view>(lock_args)
                                                        : std::span<const std::string_view>(held_args),
                              deadline, step, keys[0]);
      if (!reply) return reply.status();
    }
    return {};
  }

  // SCAN over the keys whose names start with `prefix`, then per page one
  // pipeline reading the holders of each: a mutex's or leader's hash (and
  // its PTTL), a read-write lock's writer and readers, a semaphore's permits.
  Result<std::vector<LockInfo>> list(std::string_view prefix) override {
    constexpr std::string_view step = "listing locks";
    const std::string match = glob_escape(config_.prefix) + "{" + glob_escape(prefix) + "*}:*";
    std::map<std::pair<std::string, std::string>, LockInfo> found;  // SCAN may repeat a key
    auto shards = pool_.shards(steady::now() + config_.op_timeout);
    if (!shards) return shards.status();
    for (Pool* shard : *shards) {
      std::string cursor = "0";
      do {
        auto deadline = steady::now() + config_.op_timeout;
        const std::string_view scan[] = {"SCAN", cursor, "MATCH", match, "COUNT", "1000"};
        auto page = shard->command(scan, deadline, step);
        if (!page) return page.status();
        const redisReply* r = page->get();
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
            r->element[1]->type != REDIS_REPLY_ARRAY)
          return unexpected(step);
        cursor.assign(r->element[0]->str, r->element[0]->len);
        // (name, suffix) of each key that says who holds something.
        std::vector<std::pair<std::string, std::string>> held;
        for (std::size_t i = 0; i < r->element[1]->elements; ++i) {
          std::string_view key = text_of(r->element[1]->element[i]);
          const std::size_t head = config_.prefix.size() + 1, cut = key.rfind("}:");
          if (cut == std::string_view::npos || cut < head) continue;
          std::string name(key.substr(head, cut - head)), suffix(key.substr(cut + 2));
          if (!name.starts_with(prefix)) continue;
          if (suffix == "lock" || suffix == "leader" || suffix == "rw" || suffix == "sem:permits")
            held.emplace_back(std::move(name), std::move(suffix));
        }
        Batch lookups;
        lookups.add({"TIME"});
        for (const auto& [name, suffix] : held) {
          const std::string base = config_.prefix + "{" + name + "}:";
          if (suffix == "lock" || suffix == "leader") {
            lookups.add({"HMGET", base + suffix, "owner", "token", "data"}, base);
            lookups.add({"PTTL", base + suffix}, base);
          } else if (suffix == "rw") {
            lookups.add({"HMGET", base + "rw", "writer", "wtoken", "wexp"}, base);
            lookups.add({"ZRANGE", base + "rw:readers", "0", "-1", "WITHSCORES"}, base);
            lookups.add({"HGETALL", base + "rw:tokens"}, base);
          } else {
            lookups.add({"ZRANGE", base + "sem:permits", "0", "-1", "WITHSCORES"}, base);
            lookups.add({"HGETALL", base + "sem:tokens"}, base);
          }
        }
        Replies replies = pool_.run(lookups, deadline, step);
        if (!replies.failure.ok()) return replies.failure;
        std::size_t at = 0;
        auto next = [&]() -> const redisReply* { return replies.replies[at++].get(); };
        const redisReply* time = next();
        if (time->type != REDIS_REPLY_ARRAY || time->elements != 2) return unexpected(step);
        const auto seconds = signed_number(time->element[0]), micros = signed_number(time->element[1]);
        if (!seconds || !micros) return unexpected(step);
        const std::int64_t now_ms = *seconds * 1000 + *micros / 1000;
        // A leased entry's info from its expiry (server ms) and token.
        auto leased = [&](const std::string& name, std::string_view owner, const redisReply* token,
                          std::int64_t expires, std::string kind) {
          LockInfo info;
          info.name = name;
          info.holder = "owner " + short_owner(owner);
          info.token = unsigned_number(token).value_or(0);
          info.remaining = milliseconds(expires - now_ms);
          info.kind = std::move(kind);
          return info;
        };
        for (const auto& [name, suffix] : held) {
          const std::size_t first = at;
          const std::size_t count = suffix == "rw" ? 3 : 2;
          at += count;
          for (std::size_t i = first; i < at; ++i)
            if (replies.replies[i]->type == REDIS_REPLY_ERROR)
              return to_status(nullptr, replies.replies[i].get(), step, config_.prefix + "{" + name + "}:" + suffix);
          const redisReply* a = replies.replies[first].get();
          const redisReply* b = replies.replies[first + 1].get();
          if (suffix == "lock" || suffix == "leader") {
            if (a->type != REDIS_REPLY_ARRAY || a->elements != 3 || a->element[0]->type != REDIS_REPLY_STRING)
              continue;  // released (only last_token left) or gone since SCAN
            LockInfo info;
            info.name = name;
            info.holder = "owner " + short_owner(text_of(a->element[0]));
            info.token = unsigned_number(a->element[1]).value_or(0);
            if (auto pttl_ms = integer(b); pttl_ms >= 0) info.remaining = milliseconds(pttl_ms);
            if (suffix == "leader") {
              info.kind = "leader";
              info.holder = "'" + std::string(text_of(a->element[2])) + "', " + info.holder;
            }
            found[{name, info.kind + info.holder}] = std::move(info);
            continue;
          }
          // Tokens of leased entries: HGETALL's field, value pairs.
          const redisReply* tokens = suffix == "rw" ? replies.replies[first + 2].get() : b;
          std::map<std::string_view, const redisReply*> token_of;
          for (std::size_t i = 0; tokens->type == REDIS_REPLY_ARRAY && i + 1 < tokens->elements; i += 2)
            token_of[text_of(tokens->element[i])] = tokens->element[i + 1];
          const redisReply* entries = suffix == "rw" ? b : a;
          const std::string kind = suffix == "rw" ? "read" : "permit";
          for (std::size_t i = 0; entries->type == REDIS_REPLY_ARRAY && i + 1 < entries->elements; i += 2) {
            std::string_view owner = text_of(entries->element[i]);
            auto expires = signed_number(entries->element[i + 1]);
            auto token = token_of.find(owner);
            if (!expires || *expires <= now_ms || token == token_of.end()) continue;
            auto info = leased(name, owner, token->second, *expires, kind);
            found[{name, kind + std::string(owner)}] = std::move(info);
          }
          if (suffix == "rw" && a->type == REDIS_REPLY_ARRAY && a->elements == 3 &&
              a->element[0]->type == REDIS_REPLY_STRING) {
            auto expires = signed_number(a->element[2]);
            if (expires && *expires > now_ms)
              found[{name, "write"}] = leased(name, text_of(a->element[0]), a->element[1], *expires, "write");
          }
        }
      } while (cursor != "0");
    }
    std::vector<LockInfo> out;
    out.reserve(found.size());
    for (auto& [key, info] : found) out.push_back(std::move(info));
    // By name, then in the order the holds were granted.
    std::sort(out.begin(), out.end(), [](const LockInfo& a, const LockInfo& b) {
      return std::tie(a.name, a.token) < std::tie(b.name, b.token);
    });
    return out;
  }

  // An election's leader: its id, and (watch) a Waiter told when the leader changes.
  Result<Holder> holder(std::string_view name, LockKind kind, bool watch) override {
    if (kind != LockKind::leader) return Status(errc::unsupported, "redis backend: holder() is for elections");
    const auto deadline = steady::now() + config_.op_timeout;
    const std::string step = "reading the leader of '" + std::string(name) + "'";
    WatchSlot slot(store_, watch, name, observer_tag(name));
    const std::string base = config_.prefix + "{" + std::string(name) + "}:";
    const std::string lock = base + "leader", observers = base + "leader:observers", ttl = ms(watcher_ttl);
    const std::string_view keys[] = {lock, observers};
    const std::string_view args[] = {slot.entry(), ttl};
    auto reply = pool_.eval(Script::observe, keys, args, deadline, step, lock);
    if (!reply) return reply.status();
    const redisReply* r = reply->get();
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1) return unexpected(step);
    Holder out;
    if (integer(r->element[0]) == 1 && r->elements == 2) out.data = std::string(text_of(r->element[1]));
    out.change = slot.take();
    return out;
  }

  // Called by a leaving waiter: takes its entry out of the queue if a
  // failed attempt put it there. Best effort: if the server can't be
  // reached, the entry's deadline (waiter_ttl) removes it.
  void leave(const std::shared_ptr<Subscriber::Slot>& slot, LockKind kind) noexcept {
    try {
      // Handed the lock and gone before taking it: give it on, as the
      // subscriber does with a handover that comes after this removal.
      const bool queued = subscriber_.remove(slot);
      if (auto handover = subscriber_.untaken_handover(*slot)) slot->orphaned(*handover);
      if (!queued) return;
      const auto deadline = steady::now() + config_.op_timeout;
      const std::string step = "leaving the queue of '" + slot->name + "'";
      const Layout& layout = layout_of(kind);
      const Keys keys = keys_of(slot->name, layout);
      const std::string entry = store_.entry(*slot);
      const std::string_view args[] = {entry, channel_prefix_, slot->name};
      (void)pool_.eval(layout.leave, keys.all(), args, deadline, step, keys[0]);
    } catch (...) {
    }
  }

  Subscriber& subscriber() noexcept { return subscriber_; }
  bool waits_for_replicas() const noexcept { return config_.wait_replicas > 0; }

  // A grant goes on the list re-validated after a failover (redis+sentinel,
  // redis+cluster).
  void listed(const LockRequest& request, Grant& grant) {
    if (held_) held_->add(request, grant);
  }

  // After a failover: every hold taken before (redis+cluster: those in
  // `slots`, if any are given) is looked up on its new master, one script
  // per 1000 holds (redis+cluster: of one slot), all in one batch; the
  // holder of one it does not have is told at once (Grant::dropped), not at
  // its next renewal. false: a master did not answer (the Revalidator tries
  // again).
  bool revalidate(const std::set<int>& slots) {
    const auto holds = held_->snapshot();
    constexpr std::size_t chunk = 1'000;
    const auto deadline = steady::now() + config_.op_timeout;
    const bool cluster = !config_.seeds.empty();
    // The holds to check, by slot (one server: all in one group).
    std::map<int, std::vector<std::size_t>> groups;
    for (std::size_t i = 0; i < holds.size(); ++i) {
      const int slot = cluster ? hash_slot(store_.base(holds[i].second.name)) : 0;
      if (slots.empty() || slots.count(slot)) groups[slot].push_back(i);
    }
    Batch batch;
    std::vector<std::vector<std::size_t>> checked;  // the holds of each script, in order
    for (const auto& [slot, members] : groups)
      for (std::size_t from = 0; from < members.size(); from += chunk)
        checked.emplace_back(members.begin() + static_cast<std::ptrdiff_t>(from),
                             members.begin() + static_cast<std::ptrdiff_t>(std::min(members.size(), from + chunk)));
    for (const auto& part : checked) {
      std::vector<std::string> keys, args;
      for (std::size_t i : part) {
        const HeldGrants::Held& h = holds[i].second;
        const Keys all = keys_of(h.name, layout_of(h.kind));
        switch (h.kind) {
          case LockKind::mutex:
          case LockKind::leader: keys.insert(keys.end(), {all[0], all[0], all[0]}); break;
          case LockKind::member: keys.insert(keys.end(), {all[0], all[1], all[1]}); break;
          default: keys.insert(keys.end(), {all[0], all[1], all[2]}); break;
        }
        const char* kind = h.kind == LockKind::write  ? "w"
                           : h.kind == LockKind::read   ? "r"
                           : h.kind == LockKind::permit ? "p"
                           : h.kind == LockKind::member ? "b"
                                                        : "m";
        args.insert(args.end(), {kind, h.owner, std::to_string(h.token)});
      }
      const std::vector<std::string_view> key_views(keys.begin(), keys.end()), arg_views(args.begin(), args.end());
      batch.add_eval(pool_.sha(Script::revalidate), key_views, arg_views);
    }
    Replies out = pool_.run(batch, deadline, "re-validating holds after a failover");
    bool all = out.failure.ok();
    for (std::size_t k = 0; k < checked.size() && k < out.replies.size(); ++k) {
      const redisReply* r = out.replies[k].get();
      if (r->type != REDIS_REPLY_ARRAY || r->elements != checked[k].size()) {
        all = false;  // (NOSCRIPT on a restarted server: the next round has them loaded)
        if (is_noscript(r)) (void)pool_.load(Script::revalidate, deadline);
        continue;
      }
      for (std::size_t j = 0; j < checked[k].size(); ++j)
        if (integer(r->element[j]) != 1) held_->drop(holds[checked[k][j]].first);
    }
    return all;
  }

 private:
  Keys keys_of(std::string_view name, const Layout& layout) const { return Keys(store_.base(name), layout.suffixes); }

  // What one attempt sends (the acquire script's keys and arguments), and
  // what reading its answer needs.
  struct AcquireCall {
    const LockRequest& request;
    steady::time_point sent;
    std::string step;
    // Waiting (watch() was called): the attempt queues us if it fails.
    std::shared_ptr<Subscriber::Slot> slot;
    Keys keys;
    std::vector<std::string> args;
    std::vector<std::string_view> views() const { return {args.begin(), args.end()}; }
  };
  AcquireCall acquire_call(const LockRequest& request) {
    const Layout& layout = layout_of(request.kind);
    AcquireCall call{request, steady::now(),
                     "acquiring " + std::string(kind_name(request.kind)) + " '" + request.name + "'",
                     subscriber_.find(slot_key(request), request.name), keys_of(request.name, layout), {}};
    const std::string retention = ms(config_.token_retention);
    // How long a waiter lets others barge; 0 = in order (fair, and an
    // election always: the next in line leads, as on zk://).
    const std::string bound = request.fair || request.kind == LockKind::leader ? "0" : ms(request.max_barging_wait);
    call.args = {request.owner, ms(request.lease), call.slot ? store_.entry(*call.slot) : std::string(),
                 ms(config_.waiter_ttl), bound};
    switch (request.kind) {
      case LockKind::read:
      case LockKind::write:
        call.args.insert(call.args.end(), {request.kind == LockKind::write ? "w" : "r", retention});
        break;
      case LockKind::permit:
        call.args.insert(call.args.end(), {std::to_string(request.permits), retention});
        break;
      default:
        // A mutex or a leadership: the lease's mode, and the secret a
        // handover to this wait must carry (kept with the entry, in the keys).
        call.args.push_back(request.mode == LeaseMode::fixed ? "1" : "0");
        call.args.push_back(call.slot ? subscriber_.secret(*call.slot) : std::string());
        if (request.kind == LockKind::leader)
          call.args.insert(call.args.end(), {request.data, channel_prefix_, observer_tag(request.name)});
        break;
    }
    return call;
  }
  // The attempt's outcome from the script's reply `r` (nullptr: `failure`).
  Result<Attempt> acquired(const AcquireCall& call, const redisReply* r, const Status& failure) {
    const LockRequest& request = call.request;
    const auto reply = acquire_reply_of(r);
    using Outcome = AcquireReply::Outcome;
    // Busy: our entry is queued, and leaving must remove it. Granted: the
    // script removed it. No answer: core ends its loop on this error, and
    // leaving would cost another op_timeout against a server that just
    // failed us; the entry's deadline (waiter_ttl) removes it instead.
    // A busy reply also says when the server ran it: a later handover's
    // validity counts from there.
    if (call.slot)
      subscriber_.set_queued(*call.slot, r && !(reply && reply->outcome == Outcome::granted), call.sent,
                             reply ? reply->server_ms : -1);
    if (!r) return failure;
    if (!reply) return unexpected(call.step);
    switch (reply->outcome) {
      case Outcome::granted: {
        Grant grant;
        grant.token = reply->token;
        grant.valid_until = call.sent + request.lease;
        listed(request, grant);
        return Attempt(std::move(grant));
      }
      case Outcome::other_permits:
        return Status(errc::invalid_argument,
                      "semaphore '" + request.name + "': declared here with " + std::to_string(request.permits) +
                          " permits, but the store has it with " + std::string(reply->stored_permits) +
                          " (every handle of one name must declare the same count)");
      case Outcome::busy:
        break;
    }
    Busy busy;
    if (reply->holder_ms) busy.holder_expires = steady::now() + milliseconds(*reply->holder_ms);
    if (reply->ask_again_ms) busy.ask_again = steady::now() + milliseconds(*reply->ask_again_ms);
    return Attempt(busy);
  }

  // The outcome of an attempt sent in a batch, from its reply `r` (nullptr:
  // `failure`). NOSCRIPT: the server lost its scripts (restart, SCRIPT
  // FLUSH) and nothing ran; it asks again the way that loads them.
  Result<Attempt> outcome_of(const AcquireCall& call, const redisReply* r, const Status& failure) {
    if (is_noscript(r)) return try_acquire(call.request);
    if (r && r->type == REDIS_REPLY_ERROR)
      return acquired(call, nullptr, to_status(nullptr, r, call.step, call.keys[0]));
    return acquired(call, r, failure);
  }

  // An attempt start_try_acquire sent: finish() reads its reply as
  // try_acquire() does.
  class SentAttempt final : public PendingAttempt {
   public:
    SentAttempt(RedisBackend& backend, Pool& pool, const LockRequest& request)
        : backend_(backend), pool_(pool), call_(backend.acquire_call(request)) {
      Batch batch;
      batch.add_eval(pool.sha(layout_of(request.kind).acquire), call_.keys.all(), call_.views());
      pending_ = pool.start(batch, call_.sent + backend.config_.op_timeout, call_.step);
    }
    ~SentAttempt() override {
      if (!finished_) (void)pool_.finish(pending_, call_.step);
    }
    SentAttempt(const SentAttempt&) = delete;
    SentAttempt& operator=(const SentAttempt&) = delete;

    Result<Attempt> finish() override {
      finished_ = true;
      Replies out = pool_.finish(pending_, call_.step);
      return backend_.outcome_of(call_, out.replies.empty() ? nullptr : out.replies.front().get(), out.failure);
    }

   private:
    RedisBackend& backend_;
    Pool& pool_;
    const AcquireCall call_;
    Pool::Pending pending_;
    bool finished_ = false;
  };

  // What releasing `request` sends: the script, its keys and arguments.
  struct ReleaseCall {
    Script script;
    Keys keys;
    std::vector<std::string> args;
    std::vector<std::string_view> views() const { return {args.begin(), args.end()}; }
  };
  ReleaseCall release_call(const LockRequest& request, const Grant& grant) const {
    const Layout& layout = layout_of(request.kind);
    ReleaseCall call{layout.release, keys_of(request.name, layout), {}};
    const std::string token = std::to_string(grant.token);
    switch (request.kind) {
      case LockKind::read:
      case LockKind::write:
        call.args = {request.owner, token, request.kind == LockKind::write ? "w" : "r", channel_prefix_, request.name};
        break;
      case LockKind::permit:
        call.args = {request.owner, token, channel_prefix_, request.name};
        break;
      default:
        call.args = {request.owner,  token, ms(config_.token_retention), channel_prefix_, request.name,
                     ms(config_.waiter_ttl), observer_tag(request.name)};
        break;
    }
    return call;
  }

  const std::shared_ptr<MasterLocator> locator_;
  const std::shared_ptr<HeldGrants> held_;  // redis+sentinel and redis+cluster only
  const Config config_;
  const std::string client_id_;
  const std::string channel_prefix_;
  // redis+cluster: checks the holds in slots the router saw move. Stopped
  // first (~RedisBackend) but destroyed after the router and the
  // subscriber, whose threads may still ask it for a check meanwhile.
  std::unique_ptr<Revalidator> revalidator_;
  const std::unique_ptr<Commands> commands_;  // a Pool, or redis+cluster's ClusterRouter
  Commands& pool_;
  Subscriber subscriber_;
  const Store store_;
  std::unique_ptr<CounterDriver> counters_;
  std::unique_ptr<LatchDriver> latches_;
  std::unique_ptr<BarrierDriver> barriers_;
};

RedisWaiter::~RedisWaiter() { backend_.leave(slot_, kind_); }

// The lock a release handed to us, valid until (on our clock) the earliest
// moment the server can expire it: our last attempt ran on the server no
// earlier than it was sent, so server time S maps to no earlier than
// sent + (S - that attempt's server time); 1 ms for the clock's resolution.
// With wait_replicas it is not taken as it is: the next attempt finds it
// ours, takes it under a new token and waits for the replicas.
std::optional<Grant> RedisWaiter::take_grant() {
  auto taken = backend_.subscriber().take_handover(*slot_);
  if (!taken || backend_.waits_for_replicas()) return std::nullopt;
  // (Both server times are at most latest_server_ms, the lease at most
  // longest_ms: wake_of() and acquire_reply_of() refuse more. A handover
  // stamped before our attempt ran, or long after, is not taken as it is.)
  const std::int64_t since_attempt = taken->handover.server_ms - taken->attempt_server_ms;
  if (since_attempt < 0 || since_attempt > longest_ms) return std::nullopt;
  Grant grant;
  grant.token = taken->handover.token;
  grant.valid_until =
      taken->attempt_sent + milliseconds(since_attempt - 1 + taken->handover.lease_ms);
  LockRequest request{slot_->name, slot_->owner, milliseconds(taken->handover.lease_ms)};
  request.kind = kind_;
  backend_.listed(request, grant);
  return grant;
}

Status RedisWaiter::wait_until(steady::time_point until) {
  backend_.subscriber().wait(*slot_, until);
  return {};
}

bool RedisWaiter::on_notify(std::function<void()> notify) {
  backend_.subscriber().call_back(*slot_, std::move(notify));
  return true;
}

}  // namespace

Result<std::unique_ptr<Backend>> open_redis_backend(const Url& url, const ClientOptions& options) {
  auto config = parse_config(url, options);
  if (!config) return config.status();
  auto client_id = random_client_id();
  if (!client_id) return client_id.status();
  std::shared_ptr<MasterLocator> locator;
  if (url.scheme == "redis+sentinel") {
    locator = std::make_shared<MasterLocator>(*config);
    config->discovery = locator;
  }
  auto backend = std::make_unique<RedisBackend>(std::move(*config), std::move(*client_id), std::move(locator));
  if (Status s = backend->start(); !s) return s;
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace dlock::detail
