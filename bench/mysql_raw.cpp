// dlock_bench_mysql_raw — what MySQL/MariaDB itself allows, for the mysql:// figures to be read
// against: the statements dlock's two modes send, issued with MariaDB Connector/C the way dlock
// issues them and no lock logic at all.
//
//   dlock_bench_mysql_raw [--seconds S] [--max-ops N] URL
//
// URL is dlock's mysql://user[:password]@host[:port]/database (its ?options are dropped). Four
// measurements on one kept connection, set up as dlock sets up its own (READ COMMITTED, UTC); a
// batch is one multi-statement text with its parameters written in as literals
// (backends/mysql/spelling.h) — one round trip per batch, as src/backends/mysql sends them:
//   select-1        SELECT 1: a round trip with nothing to do
//   get-lock-pairs  SELECT GET_LOCK(n, 0), then SELECT RELEASE_LOCK(n): a session lock + unlock
//   session-pairs   dlock's mode=session lock + unlock texts: GET_LOCK with the fencing token's
//                   upsert and the idle limit, then RELEASE_LOCK and the idle limit back (2 round
//                   trips, 6 statements)
//   table-pairs     dlock's table-mode lock + unlock (src/backends/sql/table_backend.cpp): the
//                   acquire's [START TRANSACTION, lock_fence, read_fence, holders, waiters] and
//                   [drop_expired, bump_token, insert_hold, dequeue, drop_dead_waiters, COMMIT],
//                   then the release's [START TRANSACTION, lock_fence, read_fence, read_release,
//                   release, heads, COMMIT]: 3 round trips, 18 statements, with dlock's own texts
//                   (sql::Dialect; read_fence and read_release stand in for RETURNING, which MySQL
//                   lacks, as Dialect::stand_in says). The fencing token is read off read_fence;
//                   nothing is decided (the lock is free: no one else uses its name).
// Each prints one JSON line: {"raw_limit": NAME, "ops": units done, "ops_per_s", "round_trips_per_op",
// "statements_per_op", "p50_us"/"p99_us" per unit, ...}; table-pairs also the p50 of each of its
// three batches. Each stops after S seconds (default 3) or N units (default 1,000,000). The password
// is never printed. dlock's tables are made if missing (as dlock makes them).
//
// Exit status: 0; 70 if the connection or a statement failed; 64 on bad usage.
#include "raw_limit.h"

#include "backends/mysql/session_locks.h"
#include "backends/mysql/spelling.h"

#include <mysql.h>

#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace sql = dlock::detail::sql;
namespace mysql = dlock::detail::mysql;
using dlock_bench::percentile_us;
using dlock_bench::timed_loop;

using Config = dlock_bench::RawArgs;  // target: the URL

// The parts of a mysql://user[:password]@host[:port]/database URL.
struct Target {
  std::string user, password, host, database;
  unsigned port = 3306;
};

Target parse(const std::string& url) {
  if (!url.starts_with("mysql://")) throw std::invalid_argument("the URL must start with mysql://");
  std::string rest = url.substr(8);
  Target t;
  if (auto at = rest.rfind('@', rest.find('/')); at != std::string::npos) {
    const std::string creds = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const auto colon = creds.find(':');
    t.user = creds.substr(0, colon);
    if (colon != std::string::npos) t.password = creds.substr(colon + 1);
  }
  const auto slash = rest.find('/');
  if (slash == std::string::npos || slash + 1 == rest.size()) throw std::invalid_argument("the URL names no database");
  t.database = rest.substr(slash + 1);
  std::string host = rest.substr(0, slash);
  if (auto colon = host.rfind(':'); colon != std::string::npos) {
    t.port = static_cast<unsigned>(std::stoul(host.substr(colon + 1)));
    host = host.substr(0, colon);
  }
  t.host = host;
  return t;
}

class Connection {
 public:
  explicit Connection(const Target& t) : mysql_(mysql_init(nullptr)) {
    if (!mysql_) throw std::runtime_error("connecting: out of memory");
    const unsigned tcp = MYSQL_PROTOCOL_TCP;
    mysql_options(mysql_, MYSQL_OPT_PROTOCOL, &tcp);
    mysql_options(mysql_, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    if (!mysql_real_connect(mysql_, t.host.c_str(), t.user.c_str(), t.password.empty() ? nullptr : t.password.c_str(),
                            t.database.c_str(), t.port, nullptr, CLIENT_MULTI_STATEMENTS | CLIENT_FOUND_ROWS))
      throw std::runtime_error("connecting: " + error());
  }
  ~Connection() { mysql_close(mysql_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Sends `text` (one or more statements) and reads every result: one round trip. Fills `out`
  // (reused) with the first cell of each statement's first row ("" if none) and returns how many
  // statements answered.
  std::size_t batch(const std::string& text, std::vector<std::string>& out, const char* what) {
    if (mysql_real_query(mysql_, text.data(), text.size()) != 0)
      throw std::runtime_error(std::string(what) + ": " + error());
    std::size_t n = 0;
    for (;;) {
      MYSQL_RES* result = mysql_store_result(mysql_);
      if (!result && mysql_field_count(mysql_) != 0) throw std::runtime_error(std::string(what) + ": " + error());
      if (out.size() <= n) out.emplace_back();
      out[n].clear();
      if (result) {
        if (MYSQL_ROW row = mysql_fetch_row(result); row && mysql_num_fields(result) > 0 && row[0])
          out[n].assign(row[0], mysql_fetch_lengths(result)[0]);
        mysql_free_result(result);
      }
      ++n;
      const int next = mysql_next_result(mysql_);
      if (next > 0) throw std::runtime_error(std::string(what) + ": " + error());
      if (next < 0) return n;
    }
  }

  std::string server_version() const { return mysql_get_server_info(mysql_); }

 private:
  std::string error() const { return std::to_string(mysql_errno(mysql_)) + " " + mysql_error(mysql_); }
  MYSQL* mysql_;
};

// A batch's text as table_backend.cpp's run() composes it: each call's text with its parameters,
// and where RETURNING is missing the statement that stands in for it, with the same parameters.
std::string batch_text(const sql::Dialect& dialect, const std::vector<sql::Call>& calls) {
  std::string text;
  const auto add = [&](sql::Stmt s, const std::vector<sql::Param>& params) {
    if (!text.empty()) text += ";\n";
    text += mysql::with_params(dialect.sql(s), params);
  };
  for (const sql::Call& call : calls) {
    const auto read = dialect.stand_in(call.statement);
    if (read && read->before) add(read->read, call.params);
    add(call.statement, call.params);
    if (read && !read->before) add(read->read, call.params);
  }
  return text;
}

void report(const Target& t, const std::string& version, const char* name, const char* unit, int round_trips,
            int statements, dlock_bench::LoopResult& r, const std::string& extra = "") {
  std::printf(
      "{\"raw_limit\": \"%s\", \"tool\": \"dlock_bench_mysql_raw (Connector/C %s)\", \"server_version\": "
      "\"%s\", \"unit\": \"%s\", \"round_trips_per_op\": %d, \"statements_per_op\": %d, \"ops\": %ld, "
      "\"seconds\": %.3f, \"ops_per_s\": %.1f, \"p50_us\": %.1f, \"p99_us\": %.1f%s, "
      "\"server\": \"%s:%u/%s\"}\n",
      name, mysql_get_client_info(), version.c_str(), unit, round_trips, statements, r.ops, r.seconds,
      r.seconds > 0 ? static_cast<double>(r.ops) / r.seconds : 0.0, percentile_us(r.latencies, 0.5),
      percentile_us(r.latencies, 0.99), extra.c_str(), t.host.c_str(), t.port, t.database.c_str());
  std::fflush(stdout);
}

void run(const Config& cfg) {
  const Target target = parse(cfg.target);
  Connection conn(target);
  const sql::Dialect dialect(mysql::spelling);
  std::vector<std::string> out;
  conn.batch("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; SET time_zone = '+00:00'", out,
             "setting the session up");
  conn.batch(dialect.schema() + ";\n" + std::string(mysql::session_schema), out, "making dlock's tables");
  const std::string version = conn.server_version();
  const std::string pid = std::to_string(::getpid());

  // select-1
  const std::string select_1 = "SELECT 1";
  auto r = timed_loop(cfg.seconds, cfg.max_ops, [&] { conn.batch(select_1, out, "SELECT 1"); });
  report(target, version, "select-1", "SELECT 1", 1, 1, r);

  // get-lock-pairs: a lock name of this process's own.
  const std::string lock = "SELECT GET_LOCK('dlock-bench-raw-" + pid + "', 0)";
  const std::string unlock = "SELECT RELEASE_LOCK('dlock-bench-raw-" + pid + "')";
  r = timed_loop(cfg.seconds, cfg.max_ops, [&] {
    conn.batch(lock, out, "GET_LOCK");
    if (out[0] != "1") throw std::runtime_error("GET_LOCK: not granted");
    conn.batch(unlock, out, "RELEASE_LOCK");
    if (out[0] != "1") throw std::runtime_error("RELEASE_LOCK: not held");
  });
  report(target, version, "get-lock-pairs", "GET_LOCK+RELEASE_LOCK", 2, 2, r);

  // session-pairs: the texts and parameters dlock's mode=session sends (a name's id is looked up
  // once and cached, as dlock does).
  const std::string name = "dlock-bench-mysql-raw-" + pid, kind = "mutex", mode = "x";
  conn.batch(mysql::with_params(mysql::session_key_of, {name}), out, "looking the name up");
  const std::string server_lock = "dlock/" + target.database + "/" + out.at(1);
  const std::string session_lock =
      mysql::with_params(mysql::session_lock, {server_lock, std::int64_t{0}, name, std::int64_t{30}});
  const std::string session_unlock = mysql::with_params(mysql::session_unlock, {server_lock});
  r = timed_loop(cfg.seconds, cfg.max_ops, [&] {
    if (conn.batch(session_lock, out, "session lock") != 4 || out[3] != "1")
      throw std::runtime_error("session lock: not granted");
    conn.batch(session_unlock, out, "session unlock");
    if (out[0] != "1") throw std::runtime_error("session unlock: not held");
  });
  report(target, version, "session-pairs", "dlock mode=session lock+unlock statements", 2, 6, r);

  // table-pairs: dlock's parameters, of about the sizes it sends (a client id is 32 hex digits).
  const std::string owner = "0123456789abcdef0123456789abcdef-1", data = "";
  const std::string holder = "host bench pid " + pid;
  const std::int64_t no_permits = 0, lease_ms = 30000, one = 1;
  const std::string look = batch_text(dialect, {{sql::Stmt::begin},
                                                {sql::Stmt::lock_fence, {name, kind, no_permits}},
                                                {sql::Stmt::holders, {name, kind}},
                                                {sql::Stmt::waiters, {name, kind}}});
  std::vector<double> look_s, take_s, release_s;
  const auto since = [](dlock_bench::clock_type::time_point t) {
    return std::chrono::duration<double>(dlock_bench::clock_type::now() - t).count();
  };
  r = timed_loop(cfg.seconds, cfg.max_ops, [&] {
    auto t = dlock_bench::clock_type::now();
    conn.batch(look, out, "look");
    look_s.push_back(since(t));
    if (out[2].empty()) throw std::runtime_error("read_fence: no row");
    const std::int64_t token = std::stoll(out[2]) + 1;
    // Texts made per lock, as dlock makes them (the token is in them).
    const std::string take =
        batch_text(dialect, {{sql::Stmt::drop_expired, {name, kind}},
                             {sql::Stmt::bump_token, {name, kind, no_permits}},
                             {sql::Stmt::insert_hold, {name, kind, owner, mode, token, lease_ms, data, holder}},
                             {sql::Stmt::dequeue, {name, kind, owner}},
                             {sql::Stmt::drop_dead_waiters, {name, kind}},
                             {sql::Stmt::commit}});
    t = dlock_bench::clock_type::now();
    conn.batch(take, out, "take");
    take_s.push_back(since(t));
    const std::string release = batch_text(dialect, {{sql::Stmt::begin},
                                                     {sql::Stmt::lock_fence, {name, kind, no_permits}},
                                                     {sql::Stmt::release, {name, kind, owner, mode, token}},
                                                     {sql::Stmt::heads, {name, kind, one}},
                                                     {sql::Stmt::commit}});
    t = dlock_bench::clock_type::now();
    conn.batch(release, out, "release");
    release_s.push_back(since(t));
    if (out[3].empty()) throw std::runtime_error("release: the hold was not there");
  });
  char extra[160];
  std::snprintf(extra, sizeof extra, ", \"look_p50_us\": %.1f, \"take_p50_us\": %.1f, \"release_p50_us\": %.1f",
                percentile_us(look_s, 0.5), percentile_us(take_s, 0.5), percentile_us(release_s, 0.5));
  report(target, version, "table-pairs", "dlock table-mode lock+unlock statements", 3, 18, r, extra);
}

int usage(const char* msg) {
  std::fprintf(stderr, "dlock_bench_mysql_raw: %s\nusage: dlock_bench_mysql_raw [--seconds S] [--max-ops N] URL\n",
               msg);
  return 64;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  if (const std::string wrong = dlock_bench::parse_raw_args(argc, argv, cfg); !wrong.empty())
    return usage(wrong.c_str());
  cfg.target = cfg.target.substr(0, cfg.target.find('?'));  // dlock's options are not the client library's
  if (cfg.target.empty()) return usage("no URL");
  try {
    run(cfg);
  } catch (const std::invalid_argument& e) {
    return usage(e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_bench_mysql_raw: %s\n", e.what());
    return 70;
  }
  return 0;
}
