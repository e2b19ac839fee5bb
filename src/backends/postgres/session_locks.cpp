// Session mode: a Mutex is pg_advisory_lock(dlock's class id, the name's
// id), held by a connection of its own for as long as the lock is held.
//
// Names: each name gets a 32-bit id from dlock_session_keys (an identity
// column: two names never share one, unlike a hash), cached per client.
// dlock's advisory locks use the two-key form with the OID of that table as
// the first key: one key space per schema (ids start at 1 in each), apart
// from the one-key (bigint) locks other programs take.
//
// Fencing: dlock_fences (kind session) bumped on the holder's connection
// right after the advisory lock is granted — durable, strictly increasing.
//
// Lease: the holding connection gets idle_session_timeout = the lease, so
// the server itself ends a session left idle that long — and with it the
// lock — when its holder stops (SIGSTOP, a long GC pause) or, with a fixed
// lease, when the lease is over. A live watchdog holder's renewal is a
// round trip on each held lock's connection (every lease / 3), which keeps
// it from idling out; a connection that fails means the server has
// dropped that lock, and the hold is reported lost. A dead holder: its
// connection closes and the server drops its locks at once.
//
// Waiting: a waiter blocks in pg_advisory_lock on a connection of its own,
// with lock_timeout bounding each wait: the server's lock queue orders the
// waiters and wakes one per release, and the lock is the waiter's when the
// call returns (Waiter::take_grant).
//
// Limits: each held lock and each waiter pins a connection; transaction-
// pooling proxies (PgBouncer's transaction mode) break session locks.
#include "backends/postgres/session_locks.h"

#include "core/owner_id.h"

#include <map>
#include <mutex>
#include <vector>

namespace dlock::detail::postgres {
namespace {

using std::chrono::milliseconds;

// A held lock's connection.
struct SessionHold final : GrantState {
  std::unique_ptr<PgConnection> conn;
  std::string key;
};

class SessionBackend;

class SessionWaiter final : public Waiter {
 public:
  SessionWaiter(SessionBackend& backend, LockRequest request) : backend_(backend), request_(std::move(request)) {}
  ~SessionWaiter() override;
  Status wait_until(steady::time_point until) override;
  std::optional<Grant> take_grant() override { return std::exchange(grant_, std::nullopt); }

 private:
  SessionBackend& backend_;
  const LockRequest request_;
  std::optional<Grant> grant_;
};

class SessionBackend final : public Backend, public LockDriver {
 public:
  SessionBackend(ConnectInfo info, milliseconds op_timeout) : info_(std::move(info)), op_timeout_(op_timeout) {}

  // The first key: dlock_session_keys' OID, as the int4 the lock functions
  // take and as the OID pg_locks shows.
  Status start() {
    auto conn = idle_connection("finding dlock_session_keys");
    if (!conn) return conn.status();
    auto out = (*conn)->exec("SELECT 'dlock_session_keys'::regclass::oid", "finding dlock_session_keys");
    if (!out) return out.status();
    give_back(std::move(*conn));
    class_oid_ = std::string(out->text(0, 0));
    class_id_ = std::to_string(static_cast<std::int32_t>(static_cast<std::uint32_t>(out->integer(0, 0))));
    return {};
  }

  Status validate_name(std::string_view) const override { return {}; }
  std::optional<std::chrono::milliseconds> session_timeout() const override { return std::nullopt; }
  LockDriver& locks() override { return *this; }

  Status ping() override {
    auto conn = idle_connection("ping");
    if (!conn) return conn.status();
    auto out = (*conn)->exec("SELECT 1", "ping");
    if (out) give_back(std::move(*conn));
    return out ? Status{} : out.status();
  }

  Result<Attempt> try_acquire(const LockRequest& request) override {
    const auto sent = steady::now();
    const std::string step = "acquiring '" + request.name + "'";
    if (request.kind != LockKind::mutex) return Status(errc::unsupported, step + ": session mode has Mutex only");
    auto key = key_of(request.name);
    if (!key) return key.status();
    auto conn = idle_connection(step);
    if (!conn) return conn.status();
    // One round trip: the lock, and if it was granted the next token and
    // the lease as the session's idle limit (`l` is evaluated once: it is
    // referenced twice, so it is materialised). A failure closes the
    // connection, and with it a lock it may have got.
    const std::string params[] = {class_id_, *key, request.name, std::to_string(request.lease.count())};
    auto got = (*conn)->query(
        "WITH l AS (SELECT pg_try_advisory_lock($1::int, $2::int) AS got), "
        "t AS (INSERT INTO dlock_fences (name, kind, last_token, permits) SELECT $3, 'session', 1, 0 FROM l "
        "WHERE got ON CONFLICT (name, kind) DO UPDATE SET last_token = dlock_fences.last_token + 1 "
        "RETURNING last_token) "
        "SELECT l.got, (SELECT last_token FROM t), "
        "CASE WHEN l.got THEN set_config('idle_session_timeout', $4, false) END FROM l",
        params, step);
    if (!got) return got.status();
    if (got->text(0, 0) != "t") {
      give_back(std::move(*conn));
      return Attempt(Busy{});
    }
    return Attempt(held(request, std::move(*conn), *key, sent, got->integer(0, 1)));
  }

  std::unique_ptr<Waiter> watch(const LockRequest& request) override {
    return std::make_unique<SessionWaiter>(*this, request);
  }

  // Blocks in pg_advisory_lock until `until` (lock_timeout): the lock, or
  // nullopt if it did not come in time.
  Result<std::optional<Grant>> wait_for(const LockRequest& request, steady::time_point until) {
    const auto sent = steady::now();
    const std::string step = "waiting for '" + request.name + "'";
    auto key = key_of(request.name);
    if (!key) return key.status();
    auto conn = idle_connection(step);
    if (!conn) return conn.status();
    const auto wait_ms = std::max<std::int64_t>(
        1, std::chrono::ceil<milliseconds>(until - steady::now()).count());
    (*conn)->set_deadline(steady::now() + milliseconds(wait_ms) + op_timeout_);
    if (auto set = (*conn)->exec("SET lock_timeout = " + std::to_string(wait_ms), step); !set) return set.status();
    const std::string params[] = {class_id_, *key};
    std::string sqlstate;
    auto got = (*conn)->query("SELECT pg_advisory_lock($1::int, $2::int)", params, step, &sqlstate);
    (*conn)->set_deadline(steady::now() + op_timeout_);
    auto reset = (*conn)->exec("SET lock_timeout = " + std::to_string(op_timeout_.count()), step);
    if (!got) {
      if (sqlstate != "55P03") return got.status();
      if (reset) give_back(std::move(*conn));
      return std::optional<Grant>();  // not in time: core tries again
    }
    if (!reset) return reset.status();  // the lock dies with the connection
    auto grant = granted(request, std::move(*conn), *key, sent);
    if (!grant) return grant.status();
    return std::optional<Grant>(std::move(*grant));
  }

  Status release(const LockRequest& request, Grant& grant) override {
    auto* hold = dynamic_cast<SessionHold*>(grant.state.get());
    if (!hold) return Status(errc::internal, "postgres backend: a session grant without its connection");
    const std::string step = "releasing '" + request.name + "'";
    hold->conn->set_deadline(steady::now() + op_timeout_);
    const std::string params[] = {class_id_, hold->key};
    auto out = hold->conn->query(
        "SELECT pg_advisory_unlock($1::int, $2::int), set_config('idle_session_timeout', '0', false)", params, step);
    if (!out)
      return Status(errc::lock_lost, "unlock '" + request.name +
                                         "': the connection holding it failed, so the server had released it");
    give_back(std::move(hold->conn));
    if (out->text(0, 0) != "t")
      return Status(errc::lock_lost, "unlock '" + request.name + "': the server no longer had it for this client");
    return {};
  }

  void renew(std::span<Renewal> batch) override {
    for (Renewal& item : batch) {
      const auto sent = steady::now();
      auto* hold = dynamic_cast<SessionHold*>(item.grant->state.get());
      if (!hold || !hold->conn) {
        item.outcome = Status(errc::lock_lost, "renewing '" + item.request->name + "': no connection holds it");
        continue;
      }
      hold->conn->set_deadline(sent + op_timeout_);
      if (auto out = hold->conn->exec("SELECT 1", "checking the connection of '" + item.request->name + "'"); out) {
        item.grant->valid_until = sent + item.request->lease;
        item.outcome = {};
      } else if (hold->conn->broken()) {
        item.outcome = Status(errc::lock_lost, "'" + item.request->name +
                                                   "': the connection holding it failed, so the server released it");
      } else {
        item.outcome = out.status();
      }
    }
  }

  Status force_release(std::string_view name) override {
    const std::string step = "force-releasing '" + std::string(name) + "'";
    auto key = key_of(std::string(name));
    if (!key) return key.status();
    auto conn = idle_connection(step);
    if (!conn) return conn.status();
    // Only the holding session may unlock: end it (needs the holder's role,
    // or pg_signal_backend).
    // Waits (up to op_timeout) until the holder's session is gone, so the
    // lock is free when this returns.
    const std::string params[] = {class_oid_, *key, std::to_string(op_timeout_.count() / 2)};
    auto out = (*conn)->query(
        "SELECT pg_terminate_backend(pid, $3::bigint) FROM pg_locks WHERE locktype = 'advisory' AND classid = $1::oid "
        "AND objid = $2::oid AND objsubid = 2 AND granted",
        params, step);
    if (!out) return out.status();
    give_back(std::move(*conn));
    return {};
  }

  Result<std::vector<LockInfo>> list(std::string_view prefix) override {
    auto conn = idle_connection("listing locks");
    if (!conn) return conn.status();
    const std::string params[] = {class_oid_, std::string(prefix)};
    auto out = (*conn)->query(
        "SELECT k.name, l.pid, coalesce(f.last_token, 0) FROM pg_locks l JOIN dlock_session_keys k ON l.objid = k.id "
        "LEFT JOIN dlock_fences f ON f.name = k.name AND f.kind = 'session' "
        "WHERE l.locktype = 'advisory' AND l.classid = $1::oid AND l.objsubid = 2 AND l.granted "
        "AND starts_with(k.name, $2) ORDER BY k.name",
        params, "listing locks");
    if (!out) return out.status();
    give_back(std::move(*conn));
    std::vector<LockInfo> infos;
    for (std::size_t i = 0; i < out->size(); ++i) {
      LockInfo info;
      info.name = out->text(i, 0);
      info.holder = "server pid " + std::string(out->text(i, 1));
      info.token = static_cast<std::uint64_t>(out->integer(i, 2));
      infos.push_back(std::move(info));  // remaining: none, it lives with the session
    }
    return infos;
  }

  void give_back(std::unique_ptr<PgConnection> conn) {
    if (!conn || conn->broken()) return;
    std::lock_guard lk(mu_);
    if (idle_.size() < 4) idle_.push_back(std::move(conn));
  }

 private:
  // A connection of no held lock: an idle one, or a new one.
  Result<std::unique_ptr<PgConnection>> idle_connection(std::string_view step) {
    const auto deadline = steady::now() + op_timeout_;
    {
      std::lock_guard lk(mu_);
      if (!idle_.empty()) {
        auto conn = std::move(idle_.back());
        idle_.pop_back();
        conn->set_deadline(deadline);
        return conn;
      }
    }
    auto conn = PgConnection::open(info_, nullptr, deadline);
    if (!conn) return Status(conn.status().code(), std::string(step) + ": " + conn.status().message());
    (*conn)->set_deadline(deadline);
    return conn;
  }

  // The name's id, from the cache or dlock_session_keys.
  Result<std::string> key_of(const std::string& name) {
    {
      std::lock_guard lk(mu_);
      if (auto it = keys_.find(name); it != keys_.end()) return it->second;
    }
    auto conn = idle_connection("looking up '" + name + "'");
    if (!conn) return conn.status();
    const std::string params[] = {name};
    // DO UPDATE, not DO NOTHING: it returns the row a concurrent insert made
    // (waiting for it to commit), where a separate read might see neither.
    auto out = (*conn)->query(
        "INSERT INTO dlock_session_keys (name) VALUES ($1) ON CONFLICT (name) DO UPDATE SET name = excluded.name "
        "RETURNING id",
        params, "looking up '" + name + "'");
    if (!out) return out.status();
    give_back(std::move(*conn));
    if (out->empty()) return Status(errc::internal, "postgres backend: no id for '" + name + "'");
    std::string key(out->text(0, 0));
    std::lock_guard lk(mu_);
    keys_[name] = key;
    return key;
  }

  // The lock is ours on `conn`: its fencing token, on the same connection.
  Result<Grant> granted(const LockRequest& request, std::unique_ptr<PgConnection> conn, const std::string& key,
                        steady::time_point sent) {
    const std::string params[] = {request.name, std::to_string(request.lease.count())};
    auto token = conn->query(
        "WITH t AS (INSERT INTO dlock_fences (name, kind, last_token, permits) VALUES ($1, 'session', 1, 0) "
        "ON CONFLICT (name, kind) DO UPDATE SET last_token = dlock_fences.last_token + 1 RETURNING last_token) "
        "SELECT last_token, set_config('idle_session_timeout', $2, false) FROM t",
        params, "issuing a fencing token for '" + request.name + "'");
    if (!token) return token.status();  // the connection (and the lock) go with it
    return held(request, std::move(conn), key, sent, token->integer(0, 0));
  }

  // The grant of a lock `conn` holds, with its token.
  static Grant held(const LockRequest& request, std::unique_ptr<PgConnection> conn, const std::string& key,
                    steady::time_point sent, std::int64_t token) {
    Grant grant;
    grant.token = static_cast<std::uint64_t>(token);
    grant.valid_until = sent + request.lease;
    auto hold = std::make_unique<SessionHold>();
    hold->conn = std::move(conn);
    hold->key = key;
    grant.state = std::move(hold);
    return grant;
  }

  const ConnectInfo info_;
  const milliseconds op_timeout_;
  std::string class_id_, class_oid_;  // set by start()
  std::mutex mu_;
  std::vector<std::unique_ptr<PgConnection>> idle_;  // guarded by mu_
  std::map<std::string, std::string> keys_;          // guarded by mu_
};

Status SessionWaiter::wait_until(steady::time_point until) {
  if (grant_) return {};
  auto got = backend_.wait_for(request_, until);
  if (!got) return got.status();
  grant_ = std::move(*got);
  return {};
}

SessionWaiter::~SessionWaiter() {
  if (!grant_) return;
  // Got it as the caller gave up: let it go.
  (void)backend_.release(request_, *grant_);
}

}  // namespace

Result<std::unique_ptr<Backend>> make_session_backend(ConnectInfo info, std::chrono::milliseconds op_timeout) {
  auto backend = std::make_unique<SessionBackend>(std::move(info), op_timeout);
  if (Status s = backend->start(); !s) return s;
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace dlock::detail::postgres
