// redis:// and redis+unix:// — locks as Lua scripts on one Redis server.
//
// Keys (all under the prefix, default "dlock:"; every key of a lock carries
// the name as its hash tag, so a lock's keys share one cluster slot, and the
// layout is injective because the prefix has no braces and the suffix is
// what follows the last "}:"):
//   <prefix>{<name>}:lock     hash  owner, token  while held (PEXPIRE = lease)
//                                   last_token     kept after release for
//                                                  token_retention (PEXPIRE)
//   <prefix>{<name>}:queue    list  waiter entries "<client id>/<owner>", oldest first
//   <prefix>{<name>}:waiters  zset  entry -> liveness deadline (server ms);
//                                   both expire with their latest deadline
// Channel: <prefix>client:<client id>, one per Client, carries wake-ups.
//
// Round trips: an uncontended acquire is one EVALSHA, a release one; a
// renewal batch is one pipeline. Re-entry is core's. Calls from concurrent
// threads share the connections by pipelining (session.h: Pool).
//
// Fencing tokens: the acquire script issues
//   token = last_token + 1      while the lock key keeps last_token
//   token = server TIME in us   once it is gone
// so no counter key lives forever: while the lock key exists (held, or
// within token_retention after release) tokens increase by the stored
// last_token, whatever the clock does; once it is gone (retention passed,
// the holder died and its lease ran out, or a restart / failover lost it)
// the server clock carries them. A name's tokens start at the clock and
// grow by one per acquisition, and no two scripts run within the same
// microsecond, so each token is at most the clock when it was issued (and
// the common path needs no TIME call). Limits: (1) if the key is gone AND
// the server's wall clock has stepped back by more than the time since the
// last token of that name was issued (at least the lease, or
// token_retention after a release), a token can repeat or go back;
// (2) tokens are ~1.7e15 today and stay exact (below 2^53) until about the
// year 2255. A resource that keeps the highest token it accepted refuses
// the stale holder in every other case.
//
// Waiters: a thread that found the lock busy registers (core's watch()) and
// its next attempt, in the same script, queues its entry with a deadline
// now + waiter_ttl; every later failed attempt refreshes it (core retries at
// least every 500 ms). A release drops dead entries from the queue's head
// and PUBLISHes to the first live one only, on its client's channel: one
// wake-up per release, whatever the number of waiters. The woken waiter
// stays at the head until it acquires or leaves (a barging acquirer may beat
// it in non-fair mode; it is then woken by the next release). A waiter that
// leaves takes its entry out (one script, from the Waiter's destructor —
// every way out of core's loop) and, if it was the woken head of a free
// lock, passes the wake-up on. A dead waiter blocks a fair queue for at
// most waiter_ttl (default 2 s).
//
// Fair mode: the acquire script grants a free lock only if the queue (after
// dropping dead heads) is empty or its head is the caller's own entry, which
// is derived from the request's owner (one thread waits for one lock at a
// time), so the retry right after watch() queues the caller.
//
// Limits: one server (no Sentinel, no Cluster); with replicas, a failover can
// lose a lock (asynchronous replication). Names starting with '}' are
// refused: their hash tag would be empty, and Redis Cluster would spread
// their keys over several slots.
#include "backends/redis/errors.h"
#include "backends/redis/options.h"
#include "backends/redis/session.h"
#include "backends/redis/subscriber.h"
#include "core/driver.h"
#include "core/owner_id.h"
#include "core/url.h"

#include <hiredis.h>

#include <algorithm>
#include <charconv>
#include <map>

namespace dlock::detail {
namespace {

using namespace redis;
using std::chrono::milliseconds;

std::string ms(milliseconds d) { return std::to_string(d.count()); }

// The keys of one lock, in the order every script expects them.
struct LockKeys {
  std::string lock, queue, waiters;
  std::array<std::string_view, 3> all() const { return {lock, queue, waiters}; }
};

// A glob pattern matching `text` literally (for SCAN MATCH).
std::string glob_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

std::int64_t integer(const redisReply* r) { return r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1; }

std::optional<std::uint64_t> unsigned_number(const redisReply* r) {
  if (!r || r->type != REDIS_REPLY_STRING) return std::nullopt;
  std::uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(r->str, r->str + r->len, value);
  if (ec != std::errc{} || ptr != r->str + r->len) return std::nullopt;
  return value;
}

Status unexpected(std::string_view step) {
  return Status(errc::internal, "redis backend: " + std::string(step) + ": unexpected reply from the script");
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
  RedisWaiter(RedisBackend& backend, std::shared_ptr<Subscriber::Slot> slot)
      : backend_(backend), slot_(std::move(slot)) {}
  ~RedisWaiter() override;
  Status wait_until(steady::time_point until) override;

 private:
  RedisBackend& backend_;
  std::shared_ptr<Subscriber::Slot> slot_;
};

class RedisBackend final : public Backend, public LockDriver {
 public:
  RedisBackend(Config config, std::string client_id)
      : config_(reporting_to(std::move(config), events())),
        client_id_(std::move(client_id)),
        channel_prefix_(config_.prefix + "client:"),
        pool_(config_, &shas_),
        subscriber_(config_, channel_prefix_ + client_id_) {}

  // Loads the scripts (a command connection) and subscribes (its own);
  // both within op_timeout, so a bad URL or password fails connect().
  Status start() {
    const auto deadline = steady::now() + config_.op_timeout;
    for (Script s : all_scripts) {
      auto sha = pool_.load(s, deadline);
      if (!sha) return sha.status();
      shas_[static_cast<std::size_t>(s)] = *sha;
    }
    return subscriber_.start(deadline);
  }

  Status validate_name(std::string_view name) const override {
    if (!name.empty() && name.front() == '}')
      return Status(errc::invalid_argument,
                    "name: must not start with '}' on redis (the key's hash tag {<name>} would be empty, and "
                    "a lock's keys could then land in different cluster slots)");
    return {};
  }

  bool supports_fair() const override { return true; }
  LockDriver& locks() override { return *this; }

  Status ping() override {
    const auto deadline = steady::now() + config_.op_timeout;
    const std::string_view words[] = {"PING"};
    auto reply = pool_.command(words, deadline, "ping");
    return reply ? Status{} : reply.status();
  }

  Result<Attempt> try_acquire(const LockRequest& request) override {
    const auto sent = steady::now();
    const auto deadline = sent + config_.op_timeout;
    const std::string step = "acquiring '" + request.name + "'";
    // Waiting (watch() was called): this attempt queues us if it fails.
    auto slot = subscriber_.find(request.owner, request.name);
    const std::string entry = slot ? entry_of(request.owner) : std::string();
    const LockKeys keys = keys_of(request.name);
    const std::string lease = ms(request.lease), ttl = ms(config_.waiter_ttl);
    const std::string_view args[] = {request.owner, lease, entry, ttl, request.fair ? "1" : "0"};

    auto reply = pool_.eval(Script::acquire, keys.all(), args, deadline, step, keys.lock);
    const redisReply* r = reply ? reply->get() : nullptr;
    const bool granted = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && integer(r->element[0]) == 1;
    // Busy: our entry is queued, and leaving must remove it. Granted: the
    // script removed it. No answer: core ends its loop on this error, and
    // leaving would cost another op_timeout against a server that just
    // failed us; the entry's deadline (waiter_ttl) removes it instead.
    if (slot) subscriber_.set_queued(*slot, reply && !granted);
    if (!reply) return reply.status();
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) return unexpected(step);
    if (granted) {
      auto token = unsigned_number(r->element[1]);
      if (!token) return unexpected(step);
      Grant grant;
      grant.token = *token;
      grant.valid_until = sent + request.lease;
      return Attempt(std::move(grant));
    }
    Busy busy;
    if (auto left = integer(r->element[1]); left >= 0) busy.holder_expires = steady::now() + milliseconds(left);
    return Attempt(busy);
  }

  std::unique_ptr<Waiter> watch(const LockRequest& request) override {
    // No round trip: the retry core makes right after this queues us.
    return std::make_unique<RedisWaiter>(*this, subscriber_.add(request.owner, request.name));
  }

  Status release(const LockRequest& request, Grant& grant) override {
    const auto deadline = steady::now() + config_.op_timeout;
    const std::string step = "releasing '" + request.name + "'";
    const LockKeys keys = keys_of(request.name);
    const std::string token = std::to_string(grant.token), retention = ms(config_.token_retention);
    const std::string_view args[] = {request.owner, token, retention, channel_prefix_, request.name};
    auto reply = pool_.eval(Script::release, keys.all(), args, deadline, step, keys.lock);
    if (!reply) return reply.status();
    switch (integer(reply->get())) {
      case 1:
        return {};
      case 0:
        return Status(errc::lock_lost, "unlock '" + request.name +
                                           "': no longer ours (the lease ran out and it expired or another holder "
                                           "took it, or it was force-released)");
      default:
        return unexpected(step);
    }
  }

  // All renewals of the batch in one pipeline: one round trip.
  void renew(std::span<Renewal> batch) override {
    if (batch.empty()) return;
    const auto sent = steady::now();
    const auto deadline = sent + config_.op_timeout;
    constexpr std::string_view step = "renewing leases";
    std::vector<std::size_t> pending(batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) pending[i] = i;
    for (int attempt = 0; attempt < 2 && !pending.empty(); ++attempt) {
      Batch commands;
      for (std::size_t i : pending) {
        const LockRequest& request = *batch[i].request;
        const std::string key = keys_of(request.name).lock;
        const std::string token = std::to_string(batch[i].grant->token), lease = ms(request.lease);
        const std::string_view keys[] = {key};
        const std::string_view args[] = {request.owner, token, lease};
        commands.add_eval(pool_.sha(Script::renew), keys, args);
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
        if (is_noscript(r) && attempt == 0) {
          noscript.push_back(pending[n]);
        } else if (r->type == REDIS_REPLY_ERROR) {
          item.outcome = to_status(nullptr, r, step, keys_of(item.request->name).lock);
        } else if (integer(r) == 1) {
          item.grant->valid_until = sent + item.request->lease;
          item.outcome = {};
        } else if (integer(r) == 0) {
          item.outcome = Status(errc::lock_lost, "renewing '" + item.request->name +
                                                     "': the lock is gone (lease ran out, server restarted, "
                                                     "force-released) or another holder has it");
        } else {
          item.outcome = unexpected(step);
        }
      }
      // The server forgot the scripts (restart): load once, redo those.
      if (!noscript.empty()) {
        if (auto loaded = pool_.load(Script::renew, deadline); !loaded) {
          for (std::size_t i : noscript) batch[i].outcome = loaded.status();
          return;
        }
      }
      pending = std::move(noscript);
    }
  }

  Status force_release(std::string_view name) override {
    const auto deadline = steady::now() + config_.op_timeout;
    const std::string step = "force-releasing '" + std::string(name) + "'";
    const LockKeys keys = keys_of(name);
    const std::string retention = ms(config_.token_retention);
    const std::string_view args[] = {retention, channel_prefix_, name};
    auto reply = pool_.eval(Script::force_release, keys.all(), args, deadline, step, keys.lock);
    return reply ? Status{} : reply.status();
  }

  // SCAN over the lock keys whose names start with `prefix`; per page, one
  // pipeline of HMGET + PTTL. Keys holding only last_token are skipped.
  Result<std::vector<LockInfo>> list(std::string_view prefix) override {
    constexpr std::string_view step = "listing locks";
    constexpr std::string_view suffix = "}:lock";
    const std::string match = glob_escape(config_.prefix) + "{" + glob_escape(prefix) + "*" + std::string(suffix);
    std::map<std::string, LockInfo> found;  // SCAN may repeat a key
    std::string cursor = "0";
    do {
      auto deadline = steady::now() + config_.op_timeout;
      const std::string_view scan[] = {"SCAN", cursor, "MATCH", match, "COUNT", "1000"};
      auto page = pool_.command(scan, deadline, step);
      if (!page) return page.status();
      const redisReply* r = page->get();
      if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
          r->element[1]->type != REDIS_REPLY_ARRAY)
        return unexpected(step);
      cursor.assign(r->element[0]->str, r->element[0]->len);
      std::vector<std::string> keys;
      for (std::size_t i = 0; i < r->element[1]->elements; ++i) {
        const redisReply* k = r->element[1]->element[i];
        if (k->type == REDIS_REPLY_STRING) keys.emplace_back(k->str, k->len);
      }
      Batch lookups;
      for (const auto& key : keys) {
        lookups.add({"HMGET", key, "owner", "token"});
        lookups.add({"PTTL", key});
      }
      Replies replies = pool_.run(lookups, deadline, step);
      if (!replies.failure.ok()) return replies.failure;
      Status failed;  // an error reply: the first one
      for (std::size_t n = 0; n < keys.size(); ++n) {
        const std::string& key = keys[n];
        const redisReply* f = replies.replies[2 * n].get();
        const redisReply* left = replies.replies[2 * n + 1].get();
        if (f->type == REDIS_REPLY_ERROR) {
          if (failed.ok()) failed = to_status(nullptr, f, step, key);
          continue;
        }
        if (!failed.ok()) continue;
        if (f->type != REDIS_REPLY_ARRAY || f->elements != 2 || f->element[0]->type != REDIS_REPLY_STRING)
          continue;  // released (only last_token left) or gone since SCAN
        const std::size_t head = config_.prefix.size() + 1;
        if (key.size() < head + suffix.size()) continue;
        LockInfo info;
        info.name = key.substr(head, key.size() - head - suffix.size());
        if (!info.name.starts_with(prefix)) continue;
        info.holder = "owner " + short_owner(std::string_view(f->element[0]->str, f->element[0]->len));
        info.token = unsigned_number(f->element[1]).value_or(0);
        if (auto pttl_ms = integer(left); pttl_ms >= 0) info.remaining = milliseconds(pttl_ms);
        found[info.name] = std::move(info);
      }
      if (!failed.ok()) return failed;
    } while (cursor != "0");
    std::vector<LockInfo> out;
    out.reserve(found.size());
    for (auto& [name, info] : found) out.push_back(std::move(info));
    return out;
  }

  // Called by a leaving waiter: takes its entry out of the queue if a
  // failed attempt put it there. Best effort: if the server can't be
  // reached, the entry's deadline (waiter_ttl) removes it.
  void leave(const std::shared_ptr<Subscriber::Slot>& slot) noexcept {
    try {
      if (!subscriber_.remove(slot)) return;
      const auto deadline = steady::now() + config_.op_timeout;
      const std::string step = "leaving the queue of '" + slot->name + "'";
      const LockKeys keys = keys_of(slot->name);
      const std::string entry = entry_of(slot->owner);
      const std::string_view args[] = {entry, channel_prefix_, slot->name};
      (void)pool_.eval(Script::leave, keys.all(), args, deadline, step, keys.lock);
    } catch (...) {
    }
  }

  Subscriber& subscriber() noexcept { return subscriber_; }

 private:
  LockKeys keys_of(std::string_view name) const {
    std::string base = config_.prefix + "{" + std::string(name) + "}:";
    return LockKeys{base + "lock", base + "queue", base + "waiters"};
  }
  std::string entry_of(const std::string& owner) const { return client_id_ + "/" + owner; }

  const Config config_;
  const std::string client_id_;
  const std::string channel_prefix_;
  ScriptShas shas_;  // written by start(), read-only afterwards
  Pool pool_;
  Subscriber subscriber_;
};

RedisWaiter::~RedisWaiter() { backend_.leave(slot_); }

Status RedisWaiter::wait_until(steady::time_point until) {
  backend_.subscriber().wait(*slot_, until);
  return {};
}

}  // namespace

Result<std::unique_ptr<Backend>> open_redis_backend(const Url& url, const ClientOptions& options) {
  auto config = parse_config(url, options);
  if (!config) return config.status();
  auto client_id = random_client_id();
  if (!client_id) return client_id.status();
  auto backend = std::make_unique<RedisBackend>(std::move(*config), std::move(*client_id));
  if (Status s = backend->start(); !s) return s;
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace dlock::detail
