// Session mode on MySQL/MariaDB (the logic: sql/session_locks.h): a lock is
// GET_LOCK('dlock/<database>/<id>'), the id being the name's row in
// dlock_session_keys — short enough for MySQL's 64-character limit, the
// same whether the server compares lock names with or without case (MySQL
// does not, MariaDB does), and one key space per database.
//
// The lease is the holding session's wait_timeout (whole seconds, rounded
// up: a server ends a connection idle that long); a waiter blocks in
// GET_LOCK with the time it has left as its timeout, in the server's queue.
// Fencing: dlock_fences bumped on the holder's connection in the same round
// trip as the lock (LAST_INSERT_ID(expr) hands the new value back).
#include "backends/mysql/session_locks.h"

#include "backends/mysql/spelling.h"
#include "backends/sql/session_locks.h"

#include <thread>

namespace dlock::detail::mysql {
namespace {

using std::chrono::milliseconds;

// Whole seconds, at least 1: what wait_timeout takes.
std::int64_t whole_seconds(milliseconds d) { return std::max<std::int64_t>(1, (d.count() + 999) / 1000); }

class MySessionConnection final : public sql::SessionConnection {
 public:
  MySessionConnection(std::unique_ptr<MyConnection> conn, std::string lock_prefix)
      : conn_(std::move(conn)), lock_prefix_(std::move(lock_prefix)) {}

  void set_deadline(steady::time_point deadline) noexcept override { conn_->set_deadline(deadline); }
  bool broken() const noexcept override { return unusable_ || conn_->broken(); }

  Result<std::int64_t> key_of(const std::string& name) override {
    auto out = conn_->exec(session_key_of, {name}, "looking up '" + name + "'");
    if (!out) return out.status();
    if (out->size() != 2 || out->back().empty() || out->back().integer(0, 0) <= 0)
      return Status(errc::internal, "mysql backend: no id for '" + name + "'");
    return out->back().integer(0, 0);
  }

  // One round trip: the lock (waiting up to `wait` in the server's queue),
  // and if it was granted the next token and the lease as the session's
  // idle limit.
  Result<std::optional<std::int64_t>> lock(std::int64_t key, const LockRequest& request, milliseconds wait) override {
    const std::string lock_name = lock_name_of(key);
    auto out = conn_->exec(
        session_lock, {lock_name, static_cast<std::int64_t>(wait.count()), request.name, whole_seconds(request.lease)},
        (wait.count() == 0 ? "acquiring '" : "waiting for '") + request.name + "'");
    if (!out) return out.status();
    const sql::Rows& got = out->back();
    if (out->size() != 4 || got.size() != 1 || got.text(0, 0).empty())
      return Status(errc::unavailable, "mysql backend: GET_LOCK of '" + request.name + "' failed");
    if (got.integer(0, 0) != 1) return std::optional<std::int64_t>();
    return std::optional<std::int64_t>(got.integer(0, 1));
  }

  Result<bool> unlock(std::int64_t key, std::string_view step) override {
    auto out = conn_->exec(session_unlock, {lock_name_of(key)}, step);
    if (!out) return out.status();
    return !out->empty() && (*out)[0].integer(0, 0) == 1;
  }

  void unlock_async(std::int64_t key, std::string step, std::function<void(Result<bool>)> answer) override {
    // A failed unlock may leave the lock held by this session: the
    // connection is not used again (its end frees the lock).
    conn_->exec_async(session_unlock, {lock_name_of(key)}, std::move(step),
                      [this, answer = std::move(answer)](Result<std::vector<sql::Rows>> out) {
                        if (!out) {
                          unusable_ = true;
                          return answer(out.status());
                        }
                        answer(!out->empty() && (*out)[0].integer(0, 0) == 1);
                      });
  }

  void read_unanswered() override { conn_->read_unanswered(); }

  Status check(std::string_view step) override {
    auto out = conn_->exec("SELECT 1", step);
    return out ? Status{} : out.status();
  }

  // Only the holding session may release: end it (the same user may end
  // its own sessions; another needs CONNECTION ADMIN), then wait until the
  // server has let the lock go.
  Status force_release(std::int64_t key, milliseconds wait, std::string_view step) override {
    const std::string lock_name = lock_name_of(key);
    const auto until = steady::now() + wait;
    for (bool killed = false;;) {
      auto out = conn_->exec("SELECT IS_USED_LOCK(?1)", {lock_name}, step);
      if (!out) return out.status();
      const std::int64_t holder = (*out)[0].integer(0, 0);
      if (holder == 0) return {};
      if (!killed) {
        auto kill = conn_->exec("KILL CONNECTION " + std::to_string(holder), step);
        if (!kill) return kill.status();
        killed = true;
      }
      if (steady::now() >= until) return {};
      std::this_thread::sleep_for(milliseconds(10));
    }
  }

  Result<std::vector<LockInfo>> list(std::string_view prefix) override {
    auto out = conn_->exec(
        "SELECT k.name, IS_USED_LOCK(CONCAT(?2, k.id)) AS holder, COALESCE(f.last_token, 0) "
        "FROM dlock_session_keys k LEFT JOIN dlock_fences f ON f.name = k.name AND f.kind = 'session' "
        "WHERE LEFT(k.name, LENGTH(?1)) = ?1 HAVING holder IS NOT NULL ORDER BY k.name",
        {prefix, lock_prefix_}, "listing locks");
    if (!out) return out.status();
    std::vector<LockInfo> infos;
    const sql::Rows& rows = out->back();
    for (std::size_t i = 0; i < rows.size(); ++i) {
      LockInfo info;
      info.name = rows.text(i, 0);
      info.holder = "server connection " + std::string(rows.text(i, 1));
      info.token = static_cast<std::uint64_t>(rows.integer(i, 2));
      infos.push_back(std::move(info));  // remaining: none, it lives with the session
    }
    return infos;
  }

 private:
  std::string lock_name_of(std::int64_t key) const { return lock_prefix_ + std::to_string(key); }

  std::unique_ptr<MyConnection> conn_;
  bool unusable_ = false;          // an unlock sent without waiting failed
  const std::string lock_prefix_;  // "dlock/<database>/"
};

}  // namespace

Result<std::unique_ptr<Backend>> make_session_backend(ConnectInfo info) {
  const auto op_timeout = info.op_timeout;
  auto open = [info = std::move(info)](steady::time_point deadline) -> Result<std::unique_ptr<sql::SessionConnection>> {
    auto conn = MyConnection::open(info, nullptr, deadline);
    if (!conn) return conn.status();
    return std::unique_ptr<sql::SessionConnection>(
        std::make_unique<MySessionConnection>(std::move(*conn), "dlock/" + info.database + "/"));
  };
  return sql::make_session_backend(std::move(open), op_timeout);
}

}  // namespace dlock::detail::mysql
