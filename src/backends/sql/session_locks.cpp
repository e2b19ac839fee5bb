// Session mode written once: a Mutex is the database's own lock, held by a
// connection of its own for as long as the lock is held (session_locks.h).
#include "backends/sql/session_locks.h"

#include "core/pending_replies.h"

#include <condition_variable>
#include <list>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

namespace dlock::detail::sql {
namespace {

using std::chrono::milliseconds;

// A held lock's connection.
struct SessionHold final : GrantState {
  std::unique_ptr<SessionConnection> conn;
  std::int64_t key = 0;
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
  SessionBackend(OpenSessionConnection open, milliseconds op_timeout)
      : open_(std::move(open)), op_timeout_(op_timeout) {}

  Status validate_name(std::string_view) const override { return {}; }
  std::optional<std::chrono::milliseconds> session_timeout() const override { return std::nullopt; }
  LockDriver& locks() override { return *this; }

  Status ping() override {
    auto conn = idle_connection("ping");
    if (!conn) return conn.status();
    Status s = (*conn)->check("ping");
    if (s) give_back(std::move(*conn));
    return s;
  }

  Result<Attempt> try_acquire(const LockRequest& request) override {
    const std::string step = "acquiring '" + request.name + "'";
    if (request.kind != LockKind::mutex) return Status(errc::unsupported, step + ": session mode has Mutex only");
    auto got = take(request, milliseconds::zero(), step);
    if (!got) return got.status();
    if (!*got) return Attempt(Busy{});
    return Attempt(std::move(**got));
  }

  std::unique_ptr<Waiter> watch(const LockRequest& request) override {
    return std::make_unique<SessionWaiter>(*this, request);
  }

  // Waits in the server's queue until `until`: the lock, or nullopt if it
  // did not come in time.
  Result<std::optional<Grant>> wait_for(const LockRequest& request, steady::time_point until) {
    const auto wait = std::max(milliseconds(1), std::chrono::ceil<milliseconds>(until - steady::now()));
    return take(request, wait, "waiting for '" + request.name + "'");
  }

  Status release(const LockRequest& request, Grant& grant) override {
    auto* hold = dynamic_cast<SessionHold*>(grant.state.get());
    if (!hold || !hold->conn) return Status(errc::internal, "session locks: a grant without its connection");
    const std::string step = "releasing '" + request.name + "'";
    hold->conn->set_deadline(steady::now() + op_timeout_);
    auto out = hold->conn->unlock(hold->key, step);
    if (!out)
      return Status(errc::lock_lost, "unlock '" + request.name +
                                         "': the connection holding it failed, so the server had released it");
    give_back(std::move(hold->conn));
    if (!*out)
      return Status(errc::lock_lost, "unlock '" + request.name + "': the server no longer had it for this client");
    return {};
  }

  void release_async(const LockRequest& request, Grant& grant, std::function<void(Status)> done) override {
    auto* hold = dynamic_cast<SessionHold*>(grant.state.get());
    if (!hold || !hold->conn) return done(release(request, grant));
    hold->conn->set_deadline(steady::now() + op_timeout_);
    std::unique_ptr<SessionConnection> conn = std::move(hold->conn);
    conn->unlock_async(
        hold->key, "releasing '" + request.name + "'",
        [name = request.name, done = unanswered_.track(std::move(done))](Result<bool> out) {
          if (!out)
            return done(Status(errc::lock_lost, "unlock '" + name +
                                                    "': the connection holding it failed, so the "
                                                    "server had released it"));
          if (!*out)
            return done(Status(errc::lock_lost, "unlock '" + name + "': the server no longer had it for this client"));
          done({});
        });
    if (conn->broken()) return;  // the answer came already: a failure
    // Its answer unread, the connection waits for this thread's next call.
    {
      std::lock_guard lk(mu_);
      answering_.push_back({std::this_thread::get_id(), std::move(conn)});
    }
    keep_answering_bounded();
  }

  void flush(steady::time_point deadline) override {
    std::list<Answering> left;
    {
      std::lock_guard lk(mu_);
      left.swap(answering_);
    }
    for (Answering& a : left) {
      a.conn->set_deadline(deadline);
      a.conn->read_unanswered();
    }
    unanswered_.close(deadline);
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
      if (Status s = hold->conn->check("checking the connection of '" + item.request->name + "'"); s) {
        item.grant->valid_until = sent + item.request->lease;
        item.outcome = {};
      } else if (hold->conn->broken()) {
        item.outcome = Status(errc::lock_lost, "'" + item.request->name +
                                                   "': the connection holding it failed, so the server released it");
      } else {
        item.outcome = s;
      }
    }
  }

  Status force_release(std::string_view name) override {
    const std::string step = "force-releasing '" + std::string(name) + "'";
    auto conn = idle_connection(step);
    if (!conn) return conn.status();
    auto key = key_of(**conn, std::string(name));
    if (!key) return key.status();
    // Waits (up to half of op_timeout) until the holder's session is gone,
    // so the lock is free when this returns.
    if (Status s = (*conn)->force_release(*key, op_timeout_ / 2, step); !s) return s;
    give_back(std::move(*conn));
    return {};
  }

  Result<std::vector<LockInfo>> list(std::string_view prefix) override {
    auto conn = idle_connection("listing locks");
    if (!conn) return conn.status();
    auto out = (*conn)->list(prefix);
    if (out) give_back(std::move(*conn));
    return out;
  }

 private:
  // The lock of `request` on a connection of its own: granted (at once, or
  // within `wait`), or nullopt.
  Result<std::optional<Grant>> take(const LockRequest& request, milliseconds wait, const std::string& step) {
    const auto sent = steady::now();
    auto conn = idle_connection(step);
    if (!conn) return conn.status();
    auto key = key_of(**conn, request.name);
    if (!key) return key.status();
    (*conn)->set_deadline(steady::now() + wait + op_timeout_);
    auto token = (*conn)->lock(*key, request, wait);
    if (!token) return token.status();  // the connection (and a lock it may have got) go with it
    if (!*token) {
      give_back(std::move(*conn));
      return std::optional<Grant>();
    }
    Grant grant;
    grant.token = static_cast<std::uint64_t>(**token);
    grant.valid_until = sent + request.lease;
    auto hold = std::make_unique<SessionHold>();
    hold->conn = std::move(*conn);
    hold->key = *key;
    grant.state = std::move(hold);
    return std::optional<Grant>(std::move(grant));
  }

  // A connection of no held lock: an idle one, or a new one. First, the
  // connections of this thread's releases sent without waiting have their
  // answers read (so this call runs after them), and the first is used.
  Result<std::unique_ptr<SessionConnection>> idle_connection(std::string_view step) {
    const auto deadline = steady::now() + op_timeout_;
    std::vector<std::unique_ptr<SessionConnection>> mine;
    {
      std::unique_lock lk(mu_);
      const auto me = std::this_thread::get_id();
      // Ours being read by keep_answering_bounded(): until it is done.
      if (!answers_read_.wait_until(lk, deadline, [&] { return !being_read_.count(me); }))
        return Status(errc::unavailable, std::string(step) +
                                             ": the answer to this thread's last unlock did not "
                                             "come within ClientOptions::op_timeout");
      for (auto it = answering_.begin(); it != answering_.end();) {
        if (it->thread != me) {
          ++it;
          continue;
        }
        mine.push_back(std::move(it->conn));
        it = answering_.erase(it);
      }
    }
    std::unique_ptr<SessionConnection> pick;
    for (auto& conn : mine) {
      conn->set_deadline(deadline);
      conn->read_unanswered();
      if (!pick && !conn->broken())
        pick = std::move(conn);
      else
        give_back(std::move(conn));
    }
    if (pick) return pick;
    {
      std::lock_guard lk(mu_);
      if (!idle_.empty()) {
        auto conn = std::move(idle_.back());
        idle_.pop_back();
        conn->set_deadline(deadline);
        return conn;
      }
    }
    auto conn = open_(deadline);
    if (!conn) return Status(conn.status().code(), std::string(step) + ": " + conn.status().message());
    (*conn)->set_deadline(deadline);
    return conn;
  }

  void give_back(std::unique_ptr<SessionConnection> conn) {
    if (!conn || conn->broken()) return;
    std::lock_guard lk(mu_);
    if (idle_.size() < 4) idle_.push_back(std::move(conn));
  }

  // Answers a thread never came back for (it has ended, or releases many
  // locks in a row): beyond a few, the oldest are read and their
  // connections reused. Outside mu_; the thread that sent one waits for
  // that reading before its next call (idle_connection).
  void keep_answering_bounded() {
    std::vector<Answering> oldest;
    {
      std::lock_guard lk(mu_);
      while (answering_.size() > max_answering) {
        ++being_read_[answering_.front().thread];
        oldest.push_back(std::move(answering_.front()));
        answering_.pop_front();
      }
    }
    if (oldest.empty()) return;
    for (Answering& a : oldest) {
      a.conn->set_deadline(steady::now() + op_timeout_);
      a.conn->read_unanswered();
      give_back(std::move(a.conn));
    }
    {
      std::lock_guard lk(mu_);
      for (const Answering& a : oldest)
        if (--being_read_[a.thread] == 0) being_read_.erase(a.thread);
    }
    answers_read_.notify_all();
  }
  static constexpr std::size_t max_answering = 16;

  // The name's id, from the cache or the table (on `conn`).
  Result<std::int64_t> key_of(SessionConnection& conn, const std::string& name) {
    {
      std::lock_guard lk(mu_);
      if (auto it = keys_.find(name); it != keys_.end()) return it->second;
    }
    auto key = conn.key_of(name);
    if (!key) return key.status();
    std::lock_guard lk(mu_);
    keys_[name] = *key;
    return *key;
  }

  const OpenSessionConnection open_;
  const milliseconds op_timeout_;
  std::mutex mu_;
  std::vector<std::unique_ptr<SessionConnection>> idle_;  // guarded by mu_
  // Connections whose unlock's answer is unread, by the thread that sent it.
  struct Answering {
    std::thread::id thread;
    std::unique_ptr<SessionConnection> conn;
  };
  std::list<Answering> answering_;             // guarded by mu_; oldest first
  std::map<std::thread::id, int> being_read_;  // guarded by mu_: of answering_'s taken out to be read
  std::condition_variable answers_read_;       // with mu_: being_read_ went down
  PendingReplies unanswered_;                                                     // releases sent without waiting
  std::map<std::string, std::int64_t> keys_;                                      // guarded by mu_
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

Result<std::unique_ptr<Backend>> make_session_backend(OpenSessionConnection open, milliseconds op_timeout) {
  return std::unique_ptr<Backend>(std::make_unique<SessionBackend>(std::move(open), op_timeout));
}

}  // namespace dlock::detail::sql
