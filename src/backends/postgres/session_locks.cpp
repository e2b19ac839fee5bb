// Session mode on PostgreSQL (the logic: sql/session_locks.h): a lock is
// pg_advisory_lock(dlock's class id, the name's id).
//
// dlock's advisory locks use the two-key form with the OID of
// dlock_session_keys as the first key: one key space per schema (ids start
// at 1 in each), apart from the one-key (bigint) locks other programs take.
// The lease is the holding session's idle_session_timeout; a waiter blocks
// in pg_advisory_lock with lock_timeout bounding its wait.
#include "backends/postgres/session_locks.h"

#include "backends/postgres/session_sql.h"
#include "backends/sql/session_locks.h"

namespace dlock::detail::postgres {
namespace {

using std::chrono::milliseconds;

// The first key: dlock_session_keys' OID, as the int4 the lock functions
// take and as the OID pg_locks shows.
struct ClassId {
  std::string as_int4, as_oid;
};

class PgSessionConnection final : public sql::SessionConnection {
 public:
  PgSessionConnection(std::unique_ptr<PgConnection> conn, std::shared_ptr<const ClassId> class_id,
                      milliseconds op_timeout)
      : conn_(std::move(conn)), class_id_(std::move(class_id)), op_timeout_(op_timeout) {}

  void set_deadline(steady::time_point deadline) noexcept override { conn_->set_deadline(deadline); }
  bool broken() const noexcept override { return unusable_ || conn_->broken(); }

  Result<std::int64_t> key_of(const std::string& name) override {
    const std::string params[] = {name};
    // DO UPDATE, not DO NOTHING: it returns the row a concurrent insert made
    // (waiting for it to commit), where a separate read might see neither.
    auto out = conn_->query(
        "INSERT INTO dlock_session_keys (name) VALUES ($1) ON CONFLICT (name) DO UPDATE SET name = excluded.name "
        "RETURNING id",
        params, "looking up '" + name + "'");
    if (!out) return out.status();
    if (out->empty()) return Status(errc::internal, "postgres backend: no id for '" + name + "'");
    return out->integer(0, 0);
  }

  Result<std::optional<std::int64_t>> lock(std::int64_t key, const LockRequest& request,
                                           milliseconds wait) override {
    return wait == milliseconds::zero() ? try_lock(key, request) : wait_lock(key, request, wait);
  }

  Result<bool> unlock(std::int64_t key, std::string_view step) override {
    const std::string params[] = {class_id_->as_int4, std::to_string(key)};
    auto out = conn_->query_prepared(session_sql::unlock, params, step);
    if (!out) return out.status();
    return out->text(0, 0) == "t";
  }

  void unlock_async(std::int64_t key, std::string step, std::function<void(Result<bool>)> answer) override {
    const std::string params[] = {class_id_->as_int4, std::to_string(key)};
    // A failed unlock may leave the lock held by this session: the
    // connection is not used again (its end frees the lock).
    conn_->query_prepared_async(session_sql::unlock, params, std::move(step),
                                [this, answer = std::move(answer)](Result<sql::Rows> out) {
                                  if (!out) {
                                    unusable_ = true;
                                    return answer(out.status());
                                  }
                                  answer(out->text(0, 0) == "t");
                                });
  }

  void read_unanswered() override { conn_->read_unanswered(); }

  Status check(std::string_view step) override {
    auto out = conn_->exec("SELECT 1", step);
    return out ? Status{} : out.status();
  }

  Status force_release(std::int64_t key, milliseconds wait, std::string_view step) override {
    // Only the holding session may unlock: end it (needs the holder's role,
    // or pg_signal_backend); pg_terminate_backend waits until it is gone.
    const std::string params[] = {class_id_->as_oid, std::to_string(key), std::to_string(wait.count())};
    auto out = conn_->query(
        "SELECT pg_terminate_backend(pid, $3::bigint) FROM pg_locks WHERE locktype = 'advisory' AND classid = $1::oid "
        "AND objid = $2::oid AND objsubid = 2 AND granted",
        params, step);
    return out ? Status{} : out.status();
  }

  Result<std::vector<LockInfo>> list(std::string_view prefix) override {
    const std::string params[] = {class_id_->as_oid, std::string(prefix)};
    auto out = conn_->query(
        "SELECT k.name, l.pid, coalesce(f.last_token, 0) FROM pg_locks l JOIN dlock_session_keys k ON l.objid = k.id "
        "LEFT JOIN dlock_fences f ON f.name = k.name AND f.kind = 'session' "
        "WHERE l.locktype = 'advisory' AND l.classid = $1::oid AND l.objsubid = 2 AND l.granted "
        "AND starts_with(k.name, $2) ORDER BY k.name",
        params, "listing locks");
    if (!out) return out.status();
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

 private:
  // One round trip: the lock and, if granted, the token and the lease.
  Result<std::optional<std::int64_t>> try_lock(std::int64_t key, const LockRequest& request) {
    const std::string params[] = {class_id_->as_int4, std::to_string(key), request.name,
                                  std::to_string(request.lease.count())};
    auto got = conn_->query_prepared(session_sql::try_lock, params, "acquiring '" + request.name + "'");
    if (!got) return got.status();
    if (got->text(0, 0) != "t") return std::optional<std::int64_t>();
    return std::optional<std::int64_t>(got->integer(0, 1));
  }

  // pg_advisory_lock with lock_timeout = `wait`; then the token. Two round
  // trips: the bound and the wait go as one simple query, which PostgreSQL
  // runs as one implicit transaction, so SET LOCAL bounds this wait alone
  // (after it, granted or not, lock_timeout is op_timeout again).
  Result<std::optional<std::int64_t>> wait_lock(std::int64_t key, const LockRequest& request, milliseconds wait) {
    const std::string step = "waiting for '" + request.name + "'";
    std::string sqlstate;
    auto got = conn_->exec("SET LOCAL lock_timeout = " + std::to_string(wait.count()) + "; SELECT pg_advisory_lock(" +
                               class_id_->as_int4 + ", " + std::to_string(key) + ")",
                           step, &sqlstate);
    conn_->set_deadline(steady::now() + op_timeout_);
    if (!got && sqlstate != "55P03") return got.status();  // a lock it got dies with the connection
    if (!got) {
      // Not in time — unless the lock was granted as the timeout fired:
      // PostgreSQL then fails the statement and the session holds the lock
      // all the same (a session-level lock outlives the failed statement).
      // Taken for not acquired, it would stay with this connection, idle in
      // the pool, and no one could have it until the client went.
      auto held = holds(key, step);
      if (!held) return held.status();
      if (!*held) return std::optional<std::int64_t>();
    }
    const std::string token_params[] = {request.name, std::to_string(request.lease.count())};
    auto token = conn_->query_prepared(session_sql::issue_token, token_params,
                                       "issuing a fencing token for '" + request.name + "'");
    if (!token) return token.status();
    return std::optional<std::int64_t>(token->integer(0, 0));
  }

  // Whether this session holds the lock `key` (pg_locks).
  Result<bool> holds(std::int64_t key, std::string_view step) {
    const std::string params[] = {class_id_->as_oid, std::to_string(key)};
    auto out = conn_->query(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() "
        "AND classid = $1::oid AND objid = $2::oid AND objsubid = 2 AND granted",
        params, step);
    if (!out) return out.status();
    return out->integer(0, 0) > 0;
  }

  std::unique_ptr<PgConnection> conn_;
  bool unusable_ = false;  // an unlock sent without waiting failed
  std::shared_ptr<const ClassId> class_id_;
  const milliseconds op_timeout_;
};

}  // namespace

Result<std::unique_ptr<Backend>> make_session_backend(ConnectInfo info, std::unique_ptr<PgConnection> first,
                                                      milliseconds op_timeout) {
  auto out = first->exec("SELECT 'dlock_session_keys'::regclass::oid", "finding dlock_session_keys");
  if (!out) return out.status();
  auto class_id = std::make_shared<ClassId>();
  class_id->as_oid = std::string(out->text(0, 0));
  class_id->as_int4 = std::to_string(static_cast<std::int32_t>(static_cast<std::uint32_t>(out->integer(0, 0))));
  auto open = [info = std::move(info), class_id = std::shared_ptr<const ClassId>(class_id),
               op_timeout](steady::time_point deadline) -> Result<std::unique_ptr<sql::SessionConnection>> {
    auto conn = PgConnection::open(info, nullptr, deadline);
    if (!conn) return conn.status();
    // Ready before it is needed: unlock() sends it without waiting.
    if (Status s = (*conn)->prepare_plain(session_sql::unlock, "preparing the unlock"); !s) return s;
    return std::unique_ptr<sql::SessionConnection>(
        std::make_unique<PgSessionConnection>(std::move(*conn), class_id, op_timeout));
  };
  return sql::make_session_backend(std::move(open), op_timeout);
}

}  // namespace dlock::detail::postgres
