// sqlite:// — the lock table recipe (backends/sql) in an SQLite database on
// one host.
//
// The recipe's transactions are BEGIN IMMEDIATE: the database's write lock
// is taken at the start, so a transaction's reads see what its writes will
// change, and a busy database makes the transaction wait in the busy
// handler (bounded by op_timeout) rather than fail half way through.
//
// Clock: several processes share the database, and the only clock they all
// read is the system's wall clock, which SQLite's julianday('now') reads:
// expires_at is unix milliseconds. Stepping the wall clock forward ends
// every lease early as other processes see it (and makes renewals fail with
// lock_lost); stepping it back keeps dead holders' locks longer. The
// holder's own view (Grant::valid_until) is on steady_clock, from the moment
// its request was sent, so a step never makes a holder believe it holds a
// lock longer than the row says.
//
// Waiters queue in the table and are woken through named pipes next to
// the database (pipe_wakeups.h): one wake-up per handoff, no polling.
//
// A Client shares one connection among its threads (one thread at a time:
// a transaction spans several statements). fork(): SQLite's per-process lock
// bookkeeping is copied into the child, so a child must neither use its
// parent's Clients (refused: the connection checks its pid) nor open
// sqlite:// Clients of its own while the parent has one open — exec first.
#include "backends/sql/table_backend.h"
#include "backends/sqlite/config.h"
#include "backends/sqlite/errors.h"
#include "backends/sqlite/pipe_wakeups.h"
#include "backends/sqlite/spelling.h"
#include "backends/sqlite/statement.h"
#include "core/driver.h"
#include "core/local_path.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

namespace dlock::detail {
namespace {

using namespace sqlite;
using std::chrono::milliseconds;

using Database = std::unique_ptr<sqlite3, decltype([](sqlite3* db) { sqlite3_close_v2(db); })>;

// The connection and what every call needs around it: whose turn it is to
// use it (one call at a time: a transaction spans several statements and
// the statements are shared), and the deadline SQLite's busy handler waits
// until.
class Connection final : public sql::Pool, public sql::Connection {
 public:
  Connection(Database db, milliseconds op_timeout)
      : db_(std::move(db)), op_timeout_(op_timeout), opened_by_(::getpid()) {
    // Our handler instead of sqlite3_busy_timeout: the wait ends at the
    // call's deadline, which also counts the wait for our turn.
    sqlite3_busy_handler(db_.get(), &Connection::on_busy, this);
  }

  sqlite3* get() const noexcept { return db_.get(); }
  milliseconds op_timeout() const noexcept { return op_timeout_; }

  // Compiles the recipe's statements once.
  Status prepare(const sql::Dialect& dialect) {
    for (std::size_t i = 0; i < sql::statement_count; ++i) {
      const auto which = static_cast<sql::Stmt>(i);
      auto prepared = Statement::prepare(db_.get(), dialect.sql(which), sql::purpose(which));
      if (!prepared) return prepared.status();
      statements_[i] = std::move(*prepared);
    }
    return {};
  }

  // Waits for this call's turn, or unavailable if other threads of this
  // client keep the connection past `deadline`.
  Result<Lease> take(std::string_view step, steady::time_point deadline) override {
    if (::getpid() != opened_by_)
      return Status(errc::internal, "sqlite backend: " + std::string(step) +
                                        ": this client was opened by the parent of this forked process; "
                                        "connect again after exec");
    std::unique_lock lk(mu_);
    // A flag under a condition variable rather than a std::timed_mutex:
    // ThreadSanitizer does not see the pthread_mutex_clocklock that
    // timed_mutex uses, and reports every unlock as a bug.
    if (!free_.wait_until(lk, deadline, [&] { return !busy_; }))
      return Status(errc::unavailable, "sqlite backend: " + std::string(step) +
                                           ": other threads of this client kept the connection busy until the "
                                           "call's deadline (ClientOptions::op_timeout)");
    busy_ = true;
    deadline_ = deadline;
    return Lease(this, Give{this});
  }

  Result<std::vector<sql::Rows>> run(std::span<const sql::Call> calls) override {
    std::vector<sql::Rows> out;
    out.reserve(calls.size());
    for (const sql::Call& call : calls) {
      auto rows = run_one(call);
      if (!rows) {
        // SQLite itself rolls back on some errors (full disk, I/O, ...);
        // only an open transaction needs our ROLLBACK.
        if (!sqlite3_get_autocommit(db_.get())) (void)Query(statement(sql::Stmt::rollback)).run();
        return rows.status();
      }
      out.push_back(std::move(*rows));
    }
    return out;
  }

 private:
  Statement& statement(sql::Stmt which) { return statements_[static_cast<std::size_t>(which)]; }

  Result<sql::Rows> run_one(const sql::Call& call) {
    Query q(statement(call.statement));
    int index = 1;
    for (const sql::Param& p : call.params) {
      if (const auto* number = std::get_if<std::int64_t>(&p))
        q.bind(index++, *number);
      else
        q.bind(index++, std::get<std::string_view>(p));
    }
    sql::Rows rows;
    int rc;
    while ((rc = q.step()) == SQLITE_ROW) {
      sql::Rows::Row row;
      const int columns = q.column_count();
      for (int c = 0; c < columns; ++c) row.push_back(q.column_is_null(c) ? std::nullopt : std::optional(q.column_text(c)));
      rows.add(std::move(row));
    }
    if (rc != SQLITE_DONE) return q.error(rc);
    rows.changed = q.changes();
    return rows;
  }

  void give_back(sql::Connection*) noexcept override { end_turn(); }

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
  std::array<Statement, sql::statement_count> statements_;  // used only during a turn
};


// Runs SQL with no parameters and no result to read (pragmas, schema).
Status exec(sqlite3* db, const char* sql, std::string_view step) {
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  return rc == SQLITE_OK ? Status{} : to_status(db, rc, step);
}

// Pragmas and schema on a freshly opened connection; the connection's busy
// handler bounds every wait by the open's deadline.
Status configure(sqlite3* db, const sql::Dialect& dialect) {
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
  std::string schema = "BEGIN IMMEDIATE;" + dialect.schema() + ";COMMIT;";
  Status s = exec(db, schema.c_str(), "creating the dlock tables");
  if (!s && !sqlite3_get_autocommit(db)) (void)exec(db, "ROLLBACK", "rollback");
  return s;
}

// Pragmas, schema and statements; counts against op_timeout like a call.
Status start(Connection& conn, const sql::Dialect& dialect) {
  auto turn = conn.take("opening the database", steady::now() + conn.op_timeout());
  if (!turn) return turn.status();
  // SQLite answers BUSY at once, without its busy handler, where waiting
  // could deadlock (several processes switching a new file to WAL at the
  // same moment): retry with backoff until the open's deadline.
  const auto deadline = steady::now() + conn.op_timeout();
  auto pause = std::chrono::microseconds(500);
  for (;;) {
    Status s = configure(conn.get(), dialect);
    if (s) break;
    if (s.code() != errc::unavailable || steady::now() + pause >= deadline) return s;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20'000));
  }
  return conn.prepare(dialect);
}

Status os_error(const std::string& step) {
  return Status(errc::unavailable, "sqlite backend: " + step + ": " + std::strerror(errno));
}

// The file system checks: read-only, so a refused URL still changes nothing.
Status check_location(const std::string& path) {
  const std::string parent = parent_dir(path);
  struct stat st {};
  if (::stat(parent.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return invalid_url("the parent directory '" + parent + "' does not exist");
    return os_error("inspecting '" + parent + "'");
  }
  if (!S_ISDIR(st.st_mode)) return invalid_url("'" + parent + "' is not a directory");
  if (on_network_file_system(parent))
    return invalid_url("'" + parent + "' is on a network file system, where SQLite's locking (and WAL) is not reliable");
  return {};
}

// The database file, made 0600 if missing (SQLite would make it 0644, and
// gives its -wal and -shm files the database file's mode), opened without
// following a symlink; refused unless it is a regular file of this user
// (or root) that nobody else may write. The descriptor is the caller's: it
// holds the file while SQLite opens the path, so that a file swapped in
// meanwhile is seen (same_file).
Result<int> open_database_file(const std::string& path) {
  // O_NONBLOCK: a FIFO planted there is refused below, not waited on.
  int fd = ::open(path.c_str(), O_RDONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == ELOOP) return invalid_url("'" + path + "' is a symlink; name the database file itself");
    if (errno == EISDIR) return invalid_url("'" + path + "' exists and is not a regular file");
    return os_error("opening '" + path + "'");
  }
  struct stat st {};
  std::string problem = ::fstat(fd, &st) != 0       ? "'" + path + "' cannot be inspected: " + std::strerror(errno)
                        : !S_ISREG(st.st_mode)       ? "'" + path + "' exists and is not a regular file"
                                                     : ownership_problem(st, path);
  if (!problem.empty()) {
    ::close(fd);
    return invalid_url(problem);
  }
  return fd;
}

// Whether `path` still names the file open as `fd`.
bool same_file(int fd, const std::string& path) {
  struct stat held {}, named {};
  return ::fstat(fd, &held) == 0 && ::lstat(path.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
         held.st_ino == named.st_ino;
}

}  // namespace

Result<std::unique_ptr<Backend>> open_sqlite_backend(const Url& url, const ClientOptions& options) {
  auto config = parse_config(url, options);
  if (!config) return config.status();
  const std::string& path = config->path;
  if (Status s = check_location(path); !s) return s;
  if (!sqlite3_threadsafe())
    return Status(errc::internal, "sqlite backend: this SQLite library was built without thread safety");

  auto file = open_database_file(path);
  if (!file) return file.status();
  sqlite3* raw = nullptr;
  // NOMUTEX: Connection's turns serialise the threads of a client (they
  // must anyway, to keep one thread's transaction from another's
  // statements). No SQLITE_OPEN_URI: the path is a file name, nothing else.
  // NOFOLLOW: nor a symlink put there since.
  int rc = sqlite3_open_v2(path.c_str(), &raw,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE | SQLITE_OPEN_NOFOLLOW,
                           nullptr);
  Database db(raw);
  const bool swapped = rc == SQLITE_OK && !same_file(*file, path);
  ::close(*file);
  if (rc != SQLITE_OK) return to_status(db.get(), rc, "opening '" + path + "'");
  if (swapped) return invalid_url("'" + path + "' was replaced by another file while it was being opened");

  static const auto dialect = std::make_shared<const sql::Dialect>(spelling);
  auto conn = std::make_unique<Connection>(std::move(db), options.op_timeout);
  if (Status s = start(*conn, *dialect); !s) return s;
  sql::TableConfig table;
  table.op_timeout = options.op_timeout;
  table.holder_info = sql::this_process();
  auto mailbox = std::make_shared<sql::Mailbox>();
  return sql::make_table_backend(dialect, mailbox, std::move(table), [&](Events&) -> Result<sql::Parts> {
    auto wakeups = PipeWakeups::open(path, mailbox);
    if (!wakeups) return wakeups.status();
    return sql::Parts{std::move(conn), std::move(*wakeups)};
  });
}

}  // namespace dlock::detail
