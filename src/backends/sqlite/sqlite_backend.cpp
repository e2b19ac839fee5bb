// sqlite:// — the design documents' lock table in an SQLite database on one host.
//
//   dlock_locks  (name PRIMARY KEY, owner, token, expires_at, pid)
//                one row per held lock; a row whose expires_at has passed is
//                free for the next acquirer to take over
//   dlock_tokens (name PRIMARY KEY, last_token)
//                the last fencing token issued per name; rows are never
//                deleted, so tokens keep increasing after a lock row goes
//   dlock_ping   (id PRIMARY KEY, at): scratch row for Backend::ping()
//
// Acquire is one BEGIN IMMEDIATE transaction (check the row, bump the token,
// write the row); release and force_release are one DELETE each; all the
// renewals of a batch share one transaction. Owner and token are both
// checked on release and renewal, so a holder whose lease ran out can
// neither free nor extend its successor's row.
//
// Wall clock: several processes share the database, and the only clock they
// all read is the system's wall clock, so expires_at is unix milliseconds.
// Stepping the wall clock forward ends every lease early as other processes
// see it (and makes renewals fail with lock_lost); stepping it back keeps
// dead holders' locks longer. The holder's own view (Grant::valid_until) is
// on steady_clock, from the moment its request was sent, so a step never
// makes a holder believe it holds a lock longer than the row says; the
// same-moment reading of both clocks (Instant) is what ties the two together.
//
// No notifications: watch() returns nullptr and core polls with backoff;
// Busy carries when the holder's lease ends so core retries then.
//
// A Client shares one connection among its threads (one thread at a time:
// a transaction spans several statements). fork(): SQLite's per-process lock
// bookkeeping is copied into the child, so a child must neither use its
// parent's Clients (refused: the connection checks its pid) nor open
// sqlite:// Clients of its own while the parent has one open — exec first.
#include "backends/sqlite/errors.h"
#include "backends/sqlite/statement.h"
#include "core/driver.h"
#include "core/local_path.h"
#include "core/owner_id.h"
#include "core/url.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

namespace dlock::detail {
namespace {

using namespace sqlite;
using std::chrono::milliseconds;

// Longest lease core allows (24 h) and then some: a bound for turning a
// stored expires_at into a steady_clock time without overflow.
constexpr milliseconds max_remaining{25 * 3'600'000};

constexpr std::string_view schema_sql = R"sql(
  CREATE TABLE IF NOT EXISTS dlock_locks (
    name       TEXT    PRIMARY KEY NOT NULL,
    owner      TEXT    NOT NULL,
    token      INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,  -- unix ms (wall clock: shared by processes)
    pid        INTEGER NOT NULL
  ) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS dlock_tokens (
    name       TEXT    PRIMARY KEY NOT NULL,
    last_token INTEGER NOT NULL
  ) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS dlock_ping (
    id INTEGER PRIMARY KEY,
    at INTEGER NOT NULL
  );
)sql";

// One moment on both clocks: the store's leases are wall-clock unix ms
// (shared by processes), the caller's are steady (immune to clock steps).
struct Instant {
  steady::time_point mono;
  std::int64_t unix_ms;

  static Instant now() {
    auto mono = steady::now();
    auto wall = std::chrono::system_clock::now();
    return {mono, std::chrono::duration_cast<milliseconds>(wall.time_since_epoch()).count()};
  }
};

// How long until a stored expires_at, as seen at `at`; 0 if it has passed.
milliseconds remaining(std::int64_t expires_at, const Instant& at) {
  return std::clamp(milliseconds(expires_at - at.unix_ms), milliseconds::zero(), max_remaining);
}

using Database = std::unique_ptr<sqlite3, decltype([](sqlite3* db) { sqlite3_close_v2(db); })>;

// The connection and what every call needs around it: whose turn it is to
// use it (one call at a time: a transaction spans several statements and
// the statements are shared), and the deadline SQLite's busy handler waits
// until.
class Connection {
 public:
  // The connection for one call; the turn ends when this goes.
  struct EndTurn {
    void operator()(Connection* c) const { c->end_turn(); }
  };
  using Turn = std::unique_ptr<Connection, EndTurn>;

  Connection(Database db, milliseconds op_timeout)
      : db_(std::move(db)), op_timeout_(op_timeout), opened_by_(::getpid()) {
    // Our handler instead of sqlite3_busy_timeout: the wait ends at the
    // call's deadline, which also counts the wait for our turn.
    sqlite3_busy_handler(db_.get(), &Connection::on_busy, this);
  }

  sqlite3* get() const noexcept { return db_.get(); }

  // Waits for this call's turn, or unavailable if other threads of this
  // client keep the connection past op_timeout.
  Result<Turn> take_turn(std::string_view step) {
    if (::getpid() != opened_by_)
      return Status(errc::internal, "sqlite backend: " + std::string(step) +
                                        ": this client was opened by the parent of this forked process; "
                                        "connect again after exec");
    const auto deadline = steady::now() + op_timeout_;
    std::unique_lock lk(mu_);
    // A flag under a condition variable rather than a std::timed_mutex:
    // ThreadSanitizer does not see the pthread_mutex_clocklock that
    // timed_mutex uses, and reports every unlock as a bug.
    if (!free_.wait_until(lk, deadline, [&] { return !busy_; }))
      return Status(errc::unavailable, "sqlite backend: " + std::string(step) +
                                           ": other threads of this client kept the connection busy for longer "
                                           "than ClientOptions::op_timeout");
    busy_ = true;
    deadline_ = deadline;
    return Turn(this);
  }

 private:
  void end_turn() {
    {
      std::lock_guard lk(mu_);
      busy_ = false;
    }
    free_.notify_one();
  }

  // Called by SQLite while another connection holds a lock we need: sleep
  // a little and retry (return 1) until the deadline, then give up (0) and
  // the statement fails with SQLITE_BUSY, which becomes unavailable.
  static int on_busy(void* self, int attempt) {
    auto* c = static_cast<Connection*>(self);
    const auto now = steady::now();
    if (now >= c->deadline_) return 0;
    // 50 us doubling to 3.2 ms: a short write transaction elsewhere is
    // usually over within the first few pauses.
    auto pause = std::chrono::microseconds(50 << std::min(attempt, 6));
    std::this_thread::sleep_for(std::min<steady::duration>(pause, c->deadline_ - now));
    return 1;
  }

  Database db_;
  const milliseconds op_timeout_;
  const pid_t opened_by_;
  std::mutex mu_;
  std::condition_variable free_;
  bool busy_ = false;              // guarded by mu_: a call has its turn
  steady::time_point deadline_{};  // written by the call whose turn it is, read by on_busy in that call
};

// The statements of every recipe, compiled once per connection.
struct Statements {
  Statement begin, commit, rollback;
  Statement holder_expiry, next_token, write_row, delete_own, extend_own, delete_any, held, ping;
};

Result<Statements> prepare_statements(sqlite3* db) {
  Statements s;
  struct {
    Statement* target;
    std::string_view what;
    std::string_view sql;
  } const all[] = {
      {&s.begin, "taking the write lock (BEGIN IMMEDIATE)", "BEGIN IMMEDIATE"},
      {&s.commit, "committing", "COMMIT"},
      {&s.rollback, "rolling back", "ROLLBACK"},
      {&s.holder_expiry, "reading the lock row", "SELECT expires_at FROM dlock_locks WHERE name = ?1"},
      {&s.next_token, "issuing a fencing token",
       "INSERT INTO dlock_tokens (name, last_token) VALUES (?1, 1) "
       "ON CONFLICT (name) DO UPDATE SET last_token = last_token + 1 RETURNING last_token"},
      {&s.write_row, "writing the lock row",
       "INSERT OR REPLACE INTO dlock_locks (name, owner, token, expires_at, pid) VALUES (?1, ?2, ?3, ?4, ?5)"},
      {&s.delete_own, "deleting our lock row",
       "DELETE FROM dlock_locks WHERE name = ?1 AND owner = ?2 AND token = ?3 RETURNING expires_at"},
      {&s.extend_own, "extending our lease",
       "UPDATE dlock_locks SET expires_at = ?1 WHERE name = ?2 AND owner = ?3 AND token = ?4 AND expires_at > ?5"},
      {&s.delete_any, "deleting the lock row", "DELETE FROM dlock_locks WHERE name = ?1"},
      // Bytes, not LIKE (whose '%' and '_' are wildcards) nor substr on
      // TEXT (which counts characters): ?1 is the prefix as a blob.
      {&s.held, "listing held locks",
       "SELECT name, owner, token, expires_at, pid FROM dlock_locks "
       "WHERE substr(CAST(name AS BLOB), 1, length(?1)) = ?1 AND expires_at > ?2 ORDER BY name"},
      {&s.ping, "ping",
       "INSERT INTO dlock_ping (id, at) VALUES (1, ?1) ON CONFLICT (id) DO UPDATE SET at = excluded.at"},
  };
  for (const auto& one : all) {
    auto prepared = Statement::prepare(db, one.sql, one.what);
    if (!prepared) return prepared.status();
    *one.target = std::move(*prepared);
  }
  return s;
}

// Runs SQL with no parameters and no result to read (pragmas, schema).
Status exec(sqlite3* db, const char* sql, std::string_view step) {
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  return rc == SQLITE_OK ? Status{} : to_status(db, rc, step);
}

// Pragmas and schema on a freshly opened connection; the connection's busy
// handler bounds every wait by the open's deadline.
Status configure(sqlite3* db) {
  // WAL: readers don't block the writer nor it them, so polling waiters
  // barely slow the holder. The mode is stored in the file; the first
  // connection switches it (and needs the database to itself for that).
  // Read the mode first: only the first opener needs to switch it.
  auto mode_is_wal = [&](const char* sql, std::string_view step) -> Result<bool> {
    auto pragma = Statement::prepare(db, sql, step);
    if (!pragma) return pragma.status();
    Query q(*pragma);
    if (int rc = q.step(); rc != SQLITE_ROW) return q.error(rc);
    return q.column_text(0) == "wal";
  };
  auto wal = mode_is_wal("PRAGMA journal_mode", "reading the journal mode");
  if (wal && !*wal) wal = mode_is_wal("PRAGMA journal_mode = WAL", "switching to WAL journal mode");
  if (!wal) return wal.status();
  if (!*wal) return Status(errc::unavailable, "sqlite backend: the database stays out of WAL journal mode; dlock needs WAL");
  // NORMAL in WAL mode: commits are not fsynced one by one, only at
  // checkpoints. A committed transaction (a fencing token, a lock row)
  // survives a crash of the process; a crash of the OS or a power cut may
  // lose the last few, and with them the highest tokens issued, which are
  // then issued again. A resource that kept the highest token it saw
  // refuses those (safe, but it refuses new holders until tokens pass it
  // again); FULL would fsync every commit to close that gap.
  if (Status s = exec(db, "PRAGMA synchronous = NORMAL", "setting synchronous=NORMAL"); !s) return s;
  // Every table at once, so concurrent first opens see all or nothing.
  std::string schema = "BEGIN IMMEDIATE;" + std::string(schema_sql) + "COMMIT;";
  Status s = exec(db, schema.c_str(), "creating the dlock tables");
  if (!s && !sqlite3_get_autocommit(db)) (void)exec(db, "ROLLBACK", "rollback");
  return s;
}

class SqliteBackend final : public Backend, public LockDriver {
 public:
  SqliteBackend(Database db, milliseconds op_timeout) : conn_(std::move(db), op_timeout), op_timeout_(op_timeout) {}

  // Pragmas, schema and statements; counts against op_timeout like a call.
  Status start() {
    auto turn = conn_.take_turn("opening the database");
    if (!turn) return turn.status();
    // SQLite answers BUSY at once, without its busy handler, where waiting
    // could deadlock (several processes switching a new file to WAL at the
    // same moment): retry with backoff until the open's deadline.
    const auto deadline = steady::now() + op_timeout_;
    auto pause = std::chrono::microseconds(500);
    for (;;) {
      Status s = configure(conn_.get());
      if (s) break;
      if (s.code() != errc::unavailable || steady::now() + pause >= deadline) return s;
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(20'000));
    }
    auto statements = prepare_statements(conn_.get());
    if (!statements) return statements.status();
    sql_ = std::move(*statements);
    return {};
  }

  Status validate_name(std::string_view) const override {
    return {};  // TEXT holds any UTF-8 that core lets through
  }

  LockDriver& locks() override { return *this; }

  Status ping() override {
    auto turn = conn_.take_turn("ping");
    if (!turn) return turn.status();
    // A single statement is its own write transaction.
    return Query(sql_.ping).bind(1, Instant::now().unix_ms).run();
  }

  Result<Attempt> try_acquire(const LockRequest& request) override {
    const Instant sent = Instant::now();
    auto turn = conn_.take_turn("acquiring '" + request.name + "'");
    if (!turn) return turn.status();

    // Read outside a transaction first: in WAL mode that takes no lock, so
    // pollers of a held lock don't queue for the write lock the holder
    // needs to release or renew.
    if (auto busy = busy_if_held(request.name); !busy) {
      return busy.status();
    } else if (*busy) {
      return Attempt(**busy);
    }

    Transaction tx(conn_.get(), sql_.begin, sql_.commit, sql_.rollback);
    if (Status s = tx.begin(); !s) return s;
    // Again under the write lock: another process may have taken it since.
    auto busy = busy_if_held(request.name);
    if (!busy) return busy.status();
    if (*busy) return Attempt(**busy);

    // Free or expired: it is ours. The token counter moves in the same
    // transaction, so a token is never issued twice nor for a lost race.
    std::int64_t token = 0;
    {
      Query q(sql_.next_token);
      int rc = q.bind(1, request.name).step();
      if (rc != SQLITE_ROW) return q.error(rc);
      token = q.column_int(0);
      if (rc = q.step(); rc != SQLITE_DONE) return q.error(rc);
    }
    // The row's expiry and our valid_until both count from `sent`.
    if (Status s = Query(sql_.write_row)
                       .bind(1, request.name)
                       .bind(2, request.owner)
                       .bind(3, token)
                       .bind(4, sent.unix_ms + request.lease.count())
                       .bind(5, std::int64_t{::getpid()})
                       .run();
        !s)
      return s;
    if (Status s = tx.commit(); !s) return s;

    Grant grant;
    grant.token = static_cast<std::uint64_t>(token);
    grant.valid_until = sent.mono + request.lease;
    return Attempt(std::move(grant));
  }

  std::unique_ptr<Waiter> watch(const LockRequest&) override {
    return nullptr;  // SQLite has no notifications: core polls
  }

  Status release(const LockRequest& request, Grant& grant) override {
    auto turn = conn_.take_turn("releasing '" + request.name + "'");
    if (!turn) return turn.status();
    // Owner and token: after our lease ran out the row may be a successor's.
    Query q(sql_.delete_own);
    q.bind(1, request.name).bind(2, request.owner).bind(3, static_cast<std::int64_t>(grant.token));
    int rc = q.step();
    if (rc == SQLITE_DONE)
      return Status(errc::lock_lost, "unlock '" + request.name +
                                         "': no longer ours (the lease ran out and another holder took it, "
                                         "or it was force-released)");
    if (rc != SQLITE_ROW) return q.error(rc);
    const std::int64_t expired_at = q.column_int(0);
    if (rc = q.step(); rc != SQLITE_DONE) return q.error(rc);
    // Still our row, but past its lease: others were free to take it.
    if (expired_at <= Instant::now().unix_ms)
      return Status(errc::lock_lost, "unlock '" + request.name + "': the lease had run out before unlock");
    return {};
  }

  void renew(std::span<Renewal> batch) override {
    const Instant sent = Instant::now();
    auto fail_all = [&](const Status& s) {
      for (auto& item : batch) item.outcome = s;
    };
    auto turn = conn_.take_turn("renewing leases");
    if (!turn) return fail_all(turn.status());
    Transaction tx(conn_.get(), sql_.begin, sql_.commit, sql_.rollback);
    if (Status s = tx.begin(); !s) return fail_all(s);
    // A lease that has run out stays out, even if no one took the lock yet:
    // the holder was told (valid_until) that it may have lost it.
    const std::int64_t now = Instant::now().unix_ms;
    std::vector<bool> extended(batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const LockRequest& request = *batch[i].request;
      Query q(sql_.extend_own);
      q.bind(1, sent.unix_ms + request.lease.count())
          .bind(2, request.name)
          .bind(3, request.owner)
          .bind(4, static_cast<std::int64_t>(batch[i].grant->token))
          .bind(5, now);
      if (Status s = q.run(); !s) return fail_all(s);
      extended[i] = q.changes() == 1;
    }
    if (Status s = tx.commit(); !s) return fail_all(s);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      Renewal& item = batch[i];
      if (extended[i]) {
        item.grant->valid_until = sent.mono + item.request->lease;
        item.outcome = {};
      } else {
        item.outcome = Status(errc::lock_lost, "renewing '" + item.request->name +
                                                   "': the lease had run out or another holder took the lock");
      }
    }
  }

  Status force_release(std::string_view name) override {
    auto turn = conn_.take_turn("force-releasing '" + std::string(name) + "'");
    if (!turn) return turn.status();
    return Query(sql_.delete_any).bind(1, name).run();
  }

  Result<std::vector<LockInfo>> list(std::string_view prefix) override {
    auto turn = conn_.take_turn("listing locks");
    if (!turn) return turn.status();
    const Instant now = Instant::now();
    Query q(sql_.held);
    q.bind_blob(1, prefix).bind(2, now.unix_ms);
    std::vector<LockInfo> out;
    int rc;
    while ((rc = q.step()) == SQLITE_ROW) {
      LockInfo info;
      info.name = q.column_text(0);
      info.holder = "pid " + std::to_string(q.column_int(4)) + " owner " + short_owner(q.column_text(1));
      info.token = static_cast<std::uint64_t>(q.column_int(2));
      info.remaining = remaining(q.column_int(3), now);
      out.push_back(std::move(info));
    }
    if (rc != SQLITE_DONE) return q.error(rc);
    return out;
  }

 private:
  // Busy (with when the holder's lease ends) if the lock is held, nullopt if
  // it is free or its lease has run out. Caller has its turn on conn_.
  Result<std::optional<Busy>> busy_if_held(const std::string& name) {
    Query q(sql_.holder_expiry);
    int rc = q.bind(1, name).step();
    if (rc == SQLITE_DONE) return std::optional<Busy>();
    if (rc != SQLITE_ROW) return q.error(rc);
    const Instant now = Instant::now();
    const auto left = remaining(q.column_int(0), now);
    if (left == milliseconds::zero()) return std::optional<Busy>();
    return std::optional<Busy>(Busy{now.mono + left});
  }

  Connection conn_;
  const milliseconds op_timeout_;
  Statements sql_;  // used only during a turn on conn_
};

Status invalid(std::string why) { return Status(errc::invalid_argument, "sqlite url: " + std::move(why)); }

Status os_error(const std::string& step) {
  return Status(errc::unavailable, "sqlite backend: " + step + ": " + std::strerror(errno));
}

// The URL's checks, all before anything touches the file system: the
// database file's path, or why the URL is refused.
Result<std::string> database_path(const Url& url) {
  if (!url.endpoints.empty()) return invalid("takes no host; write sqlite:///absolute/path.db (three slashes)");
  if (url.user || url.password) return invalid("takes no user or password");
  if (!url.query.empty()) return invalid("unknown option '" + url.query.begin()->first + "' (this backend takes none)");
  const std::string& path = url.path;
  if (path.empty() || path.front() != '/')
    return invalid("needs an absolute path to the database file, e.g. sqlite:///var/lib/myapp/locks.db");
  if (path.find('\0') != std::string::npos) return invalid("path contains a NUL byte");
  if (path.back() == '/') return invalid("path '" + path + "' names a directory; it must name the database file");
  if (!is_plain_absolute_path(path))
    return invalid("path '" + path + "' must be a plain absolute path without '.', '..' or empty segments");
  return path;
}

// The file system checks: read-only, so a refused URL still changes nothing.
Status check_location(const std::string& path) {
  const std::string parent = parent_dir(path);
  struct stat st {};
  if (::stat(parent.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return invalid("the parent directory '" + parent + "' does not exist");
    return os_error("inspecting '" + parent + "'");
  }
  if (!S_ISDIR(st.st_mode)) return invalid("'" + parent + "' is not a directory");
  if (on_network_file_system(parent))
    return invalid("'" + parent + "' is on a network file system, where SQLite's locking (and WAL) is not reliable");
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return invalid("'" + path + "' exists and is not a regular file");
  return {};
}

}  // namespace

Result<std::unique_ptr<Backend>> open_sqlite_backend(const Url& url, const ClientOptions& options) {
  auto path = database_path(url);
  if (!path) return path.status();
  if (Status s = check_location(*path); !s) return s;
  if (!sqlite3_threadsafe())
    return Status(errc::internal, "sqlite backend: this SQLite library was built without thread safety");

  // Create the file ourselves so it is 0600 (SQLite would make it 0644, and
  // gives its -wal and -shm files the database file's mode).
  int fd = ::open(path->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0)
    ::close(fd);
  else if (errno != EEXIST)
    return os_error("creating '" + *path + "'");

  sqlite3* raw = nullptr;
  // NOMUTEX: Connection's turns serialise the threads of a client (they
  // must anyway, to keep one thread's transaction from another's
  // statements). No SQLITE_OPEN_URI: the path is a file name, nothing else.
  int rc = sqlite3_open_v2(path->c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE,
                           nullptr);
  Database db(raw);
  if (rc != SQLITE_OK) return to_status(db.get(), rc, "opening '" + *path + "'");

  auto backend = std::make_unique<SqliteBackend>(std::move(db), options.op_timeout);
  if (Status s = backend->start(); !s) return s;
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace dlock::detail
