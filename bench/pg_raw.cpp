// dlock_bench_pg_raw — what PostgreSQL itself allows, for the postgres:// figures to be read against:
// the statements a lock sends, issued with libpq the way dlock issues them and no lock
// logic at all.
//
//   dlock_bench_pg_raw [--seconds S] [--max-ops N] URL
//
// URL is dlock's postgres://user[:password]@host[:port]/database (its ?options are dropped) or any
// libpq URI. Five measurements on one kept connection; every statement but the unprepared ones is
// prepared once, and a batch is sent as one pipeline closed by a sync — one round trip per batch,
// as src/backends/postgres sends them:
//   select-1        SELECT 1: a round trip with nothing to do
//   advisory-pairs  pg_advisory_lock(k), then pg_advisory_unlock(k): a session lock + unlock
//   session-pairs   session mode's lock + unlock (src/backends/postgres/session_sql.h: the advisory
//                   lock with its fencing-token upsert and idle limit, then the unlock): 2 round
//                   trips, prepared; session-pairs-unprepared sends the same texts parsed and planned
//                   each time
//   table-pairs     dlock's table-mode lock + unlock (src/backends/sql/table_backend.cpp): the
//                   acquire's [BEGIN, lock_fence, holders, waiters] and [drop_expired, bump_token,
//                   insert_hold, dequeue, drop_dead_waiters, COMMIT], then the release's [BEGIN,
//                   lock_fence, release, heads, COMMIT]: 3 round trips, 15 statements, with dlock's
//                   own texts (sql::Dialect). The fencing token is read off lock_fence; nothing is
//                   decided (the lock is free: no one else uses its name).
// Each prints one JSON line: {"raw_limit": NAME, "ops": units done, "ops_per_s", "round_trips_per_op",
// "statements_per_op", "p50_us"/"p99_us" per unit, ...}; table-pairs also the p50 of each of its three
// batches. Each stops after S seconds (default 3) or N units (default 1,000,000). The password is
// never printed. dlock's tables are made if missing (as dlock makes them).
//
// Exit status: 0; 70 if the connection or a statement failed; 64 on bad usage.
#include "raw_limit.h"

#include "backends/postgres/session_sql.h"
#include "backends/postgres/spelling.h"

#include <libpq-fe.h>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace sql = dlock::detail::sql;
using dlock_bench::percentile_us;
using dlock_bench::timed_loop;

using Config = dlock_bench::RawArgs;  // target: the URL

using dlock::detail::postgres::numbered;
using dlock::detail::postgres::spelling;
namespace session_sql = dlock::detail::postgres::session_sql;

// One statement of a batch and its parameters, as text: prepared (`name`), or
// parsed and planned on each send (`name` null, `text`).
struct Send {
  const char* name;
  std::vector<std::string> params = {};
  const char* text = nullptr;
};

struct Result {
  ExecStatusType status;
  std::vector<std::vector<std::string>> rows;
};

class Connection {
 public:
  explicit Connection(const std::string& url) : conn_(PQconnectdb(url.c_str())) {
    if (!conn_ || PQstatus(conn_) != CONNECTION_OK)
      throw std::runtime_error(std::string("connecting: ") + (conn_ ? PQerrorMessage(conn_) : "out of memory"));
    PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
  }
  ~Connection() { PQfinish(conn_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Before pipeline mode: a simple-protocol script (several statements allowed).
  void script(const std::string& text, const char* what) {
    PGresult* r = PQexec(conn_, text.c_str());
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    const std::string why = ok ? "" : PQresultErrorMessage(r);
    PQclear(r);
    if (!ok) throw std::runtime_error(std::string(what) + ": " + why);
  }

  void prepare(const char* name, const std::string& text) {
    PGresult* r = PQprepare(conn_, name, text.c_str(), 0, nullptr);
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    const std::string why = ok ? "" : PQresultErrorMessage(r);
    PQclear(r);
    if (!ok) throw std::runtime_error("preparing " + std::string(name) + ": " + why);
  }

  void enter_pipeline() {
    if (PQenterPipelineMode(conn_) != 1) throw std::runtime_error("pipeline mode: " + error());
  }

  // Sends the batch as one pipeline with one sync and reads every result: one round trip.
  // Fills `out` (reused: no allocation once warm) with one Result per statement.
  void batch(const std::vector<Send>& sends, std::vector<Result>& out) {
    std::vector<const char*> values;
    for (const Send& s : sends) {
      values.clear();
      for (const std::string& p : s.params) values.push_back(p.c_str());
      const int sent = s.name ? PQsendQueryPrepared(conn_, s.name, static_cast<int>(values.size()), values.data(),
                                                    nullptr, nullptr, 0)
                              : PQsendQueryParams(conn_, s.text, static_cast<int>(values.size()), nullptr,
                                                  values.data(), nullptr, nullptr, 0);
      if (!sent) throw std::runtime_error(std::string("sending ") + (s.name ? s.name : s.text) + ": " + error());
    }
    if (!PQpipelineSync(conn_)) throw std::runtime_error("sync: " + error());  // flushes: blocking mode
    out.resize(sends.size());
    std::string first_error;
    for (std::size_t i = 0; i < sends.size(); ++i) {
      PGresult* r = PQgetResult(conn_);
      if (!r) throw std::runtime_error("no result for a statement: " + error());
      out[i].status = PQresultStatus(r);
      out[i].rows.resize(static_cast<std::size_t>(PQntuples(r)));
      for (int row = 0; row < PQntuples(r); ++row) {
        auto& cells = out[i].rows[static_cast<std::size_t>(row)];
        cells.resize(static_cast<std::size_t>(PQnfields(r)));
        for (int c = 0; c < PQnfields(r); ++c) cells[static_cast<std::size_t>(c)] = PQgetvalue(r, row, c);
      }
      if (out[i].status != PGRES_COMMAND_OK && out[i].status != PGRES_TUPLES_OK && first_error.empty())
        first_error = std::string(sends[i].name ? sends[i].name : sends[i].text) + ": " + PQresultErrorMessage(r);
      PQclear(r);
      if (PGresult* end = PQgetResult(conn_)) PQclear(end);  // the NULL after each statement's result
    }
    PGresult* sync = PQgetResult(conn_);
    const bool synced = sync && PQresultStatus(sync) == PGRES_PIPELINE_SYNC;
    PQclear(sync);
    if (!first_error.empty()) throw std::runtime_error(first_error);
    if (!synced) throw std::runtime_error("the pipeline did not end with its sync");
  }

  int server_version() const { return PQserverVersion(conn_); }
  pg_conn* raw() const { return conn_; }

 private:
  std::string error() const { return PQerrorMessage(conn_); }
  PGconn* conn_;
};

// host:port/database of a URL, for the report: no user, no password.
std::string server_of(const std::string& url) {
  auto rest = url.substr(url.find("://") == std::string::npos ? 0 : url.find("://") + 3);
  if (auto at = rest.rfind('@', rest.find('/')); at != std::string::npos) rest = rest.substr(at + 1);
  return rest;
}

void report(const Config& cfg, int server_version, const char* name, const char* unit, int round_trips,
            int statements, dlock_bench::LoopResult& r, const std::string& extra = "") {
  std::printf("{\"raw_limit\": \"%s\", \"tool\": \"dlock_bench_pg_raw (libpq %d)\", \"server_version\": %d, "
              "\"unit\": \"%s\", \"round_trips_per_op\": %d, \"statements_per_op\": %d, \"ops\": %ld, "
              "\"seconds\": %.3f, \"ops_per_s\": %.1f, \"p50_us\": %.1f, \"p99_us\": %.1f%s, \"server\": \"%s\"}\n",
              name, PQlibVersion(), server_version, unit, round_trips, statements, r.ops, r.seconds,
              r.seconds > 0 ? static_cast<double>(r.ops) / r.seconds : 0.0, percentile_us(r.latencies, 0.5),
              percentile_us(r.latencies, 0.99), extra.c_str(), server_of(cfg.target).c_str());
  std::fflush(stdout);
}

// What session mode uses as its advisory locks' first key: dlock_session_keys' OID, as an int4.
std::string session_class_id(Connection& conn) {
  PGresult* r = PQexec(conn.raw(), "SELECT 'dlock_session_keys'::regclass::oid");
  const bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
  const std::string oid = ok ? PQgetvalue(r, 0, 0) : "";
  const std::string why = ok ? "" : PQresultErrorMessage(r);
  PQclear(r);
  if (!ok) throw std::runtime_error("finding dlock_session_keys: " + why);
  return std::to_string(static_cast<std::int32_t>(static_cast<std::uint32_t>(std::stoul(oid))));
}

void run(const Config& cfg) {
  Connection conn(cfg.target);
  const sql::Dialect dialect(spelling);
  conn.script(dialect.schema() + ";\n" + std::string(dlock::detail::postgres::session_schema), "making dlock's tables");
  const auto text = [&](sql::Stmt s) { return numbered(dialect.sql(s)); };
  const std::pair<const char*, sql::Stmt> used[] = {
      {"begin", sql::Stmt::begin},       {"commit", sql::Stmt::commit},
      {"lock_fence", sql::Stmt::lock_fence}, {"holders", sql::Stmt::holders},
      {"waiters", sql::Stmt::waiters},   {"drop_expired", sql::Stmt::drop_expired},
      {"bump_token", sql::Stmt::bump_token}, {"insert_hold", sql::Stmt::insert_hold},
      {"dequeue", sql::Stmt::dequeue},   {"drop_dead_waiters", sql::Stmt::drop_dead_waiters},
      {"release", sql::Stmt::release},   {"heads", sql::Stmt::heads}};
  for (const auto& [name, statement] : used) conn.prepare(name, text(statement));
  conn.prepare("select_1", "SELECT 1");
  conn.prepare("advisory_lock", "SELECT pg_advisory_lock($1)");
  conn.prepare("advisory_unlock", "SELECT pg_advisory_unlock($1)");
  conn.prepare("session_lock", session_sql::try_lock);
  conn.prepare("session_unlock", session_sql::unlock);
  const std::string class_id = session_class_id(conn);
  conn.enter_pipeline();
  const int version = conn.server_version();
  std::vector<Result> out;

  // select-1
  const std::vector<Send> select_1 = {{"select_1"}};
  auto r = timed_loop(cfg.seconds, cfg.max_ops, [&] { conn.batch(select_1, out); });
  report(cfg, version, "select-1", "SELECT 1", 1, 1, r);

  // advisory-pairs: a key of this process's own.
  const std::string key = std::to_string(0x646c6f636b000000LL + ::getpid());
  const std::vector<Send> lock = {{"advisory_lock", {key}}}, unlock = {{"advisory_unlock", {key}}};
  r = timed_loop(cfg.seconds, cfg.max_ops, [&] {
    conn.batch(lock, out);
    conn.batch(unlock, out);
    if (out[0].rows.size() != 1 || out[0].rows[0][0] != "t") throw std::runtime_error("pg_advisory_unlock: not held");
  });
  report(cfg, version, "advisory-pairs", "pg_advisory_lock+pg_advisory_unlock", 2, 2, r);

  // session-pairs: session mode's lock (advisory lock, token, idle limit) and unlock, as prepared
  // statements (dlock's way) and, for comparison, parsed and planned on every send. The key is
  // outside the ids dlock_session_keys hands out; the name is this process's own.
  const std::string session_key = std::to_string(2'000'000'000 + ::getpid() % 100'000);
  const std::string session_name = "dlock-bench-pg-raw-session-" + std::to_string(::getpid());
  for (const bool prepared : {true, false}) {
    const std::vector<Send> take_lock = {
        {prepared ? "session_lock" : nullptr, {class_id, session_key, session_name, "30000"}, session_sql::try_lock}};
    const std::vector<Send> give_back = {
        {prepared ? "session_unlock" : nullptr, {class_id, session_key}, session_sql::unlock}};
    r = timed_loop(cfg.seconds, cfg.max_ops, [&] {
      conn.batch(take_lock, out);
      if (out[0].rows.size() != 1 || out[0].rows[0][0] != "t") throw std::runtime_error("session lock: not granted");
      conn.batch(give_back, out);
      if (out[0].rows.size() != 1 || out[0].rows[0][0] != "t") throw std::runtime_error("session unlock: not held");
    });
    report(cfg, version, prepared ? "session-pairs" : "session-pairs-unprepared",
           "dlock session-mode lock+unlock statements", 2, 2, r);
  }

  // table-pairs: dlock's parameters, of about the sizes it sends (a client id is 32 hex digits).
  const std::string name = "dlock-bench-pg-raw-" + std::to_string(::getpid()), kind = "mutex", mode = "x";
  const std::string owner = "0123456789abcdef0123456789abcdef-1", lease_ms = "30000", data = "";
  const std::string holder = "host bench pid " + std::to_string(::getpid());
  const std::vector<Send> look = {
      {"begin"}, {"lock_fence", {name, kind, "0"}}, {"holders", {name, kind}}, {"waiters", {name, kind}}};
  std::vector<Send> take = {{"drop_expired", {name, kind}},
                            {"bump_token", {name, kind, "0"}},
                            {"insert_hold", {name, kind, owner, mode, "", lease_ms, data, holder}},
                            {"dequeue", {name, kind, owner}},
                            {"drop_dead_waiters", {name, kind}},
                            {"commit"}};
  std::vector<Send> release = {{"begin"},
                               {"lock_fence", {name, kind, "0"}},
                               {"release", {name, kind, owner, mode, ""}},
                               {"heads", {name, kind, "1"}},
                               {"commit"}};
  std::vector<double> look_s, take_s, release_s;
  const auto since = [](dlock_bench::clock_type::time_point t) {
    return std::chrono::duration<double>(dlock_bench::clock_type::now() - t).count();
  };
  r = timed_loop(cfg.seconds, cfg.max_ops, [&] {
    auto t = dlock_bench::clock_type::now();
    conn.batch(look, out);
    look_s.push_back(since(t));
    if (out[1].rows.size() != 1) throw std::runtime_error("lock_fence: no row");
    const std::string token = std::to_string(std::stoll(out[1].rows[0][0]) + 1);
    take[2].params[4] = token;
    release[2].params[4] = token;
    t = dlock_bench::clock_type::now();
    conn.batch(take, out);
    take_s.push_back(since(t));
    t = dlock_bench::clock_type::now();
    conn.batch(release, out);
    release_s.push_back(since(t));
    if (out[2].rows.size() != 1) throw std::runtime_error("release: the hold was not there");
  });
  char extra[160];
  std::snprintf(extra, sizeof extra, ", \"look_p50_us\": %.1f, \"take_p50_us\": %.1f, \"release_p50_us\": %.1f",
                percentile_us(look_s, 0.5), percentile_us(take_s, 0.5), percentile_us(release_s, 0.5));
  report(cfg, version, "table-pairs", "dlock table-mode lock+unlock statements", 3, 15, r, extra);
}

int usage(const char* msg) {
  std::fprintf(stderr, "dlock_bench_pg_raw: %s\nusage: dlock_bench_pg_raw [--seconds S] [--max-ops N] URL\n", msg);
  return 64;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  if (const std::string wrong = dlock_bench::parse_raw_args(argc, argv, cfg); !wrong.empty())
    return usage(wrong.c_str());
  cfg.target = cfg.target.substr(0, cfg.target.find('?'));  // dlock's options are not libpq's
  if (cfg.target.empty()) return usage("no URL");
  try {
    run(cfg);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_bench_pg_raw: %s\n", e.what());
    return 70;
  }
  return 0;
}
