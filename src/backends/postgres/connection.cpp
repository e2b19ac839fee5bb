#include "backends/postgres/connection.h"

#include "backends/postgres/errors.h"
#include "backends/postgres/spelling.h"

#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <string>

namespace dlock::detail::postgres {
namespace {

int millis_until(steady::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - steady::now()).count();
  return static_cast<int>(std::clamp<std::int64_t>(left, 0, 60'000));
}

sql::Rows rows_of(const PGresult* r) {
  sql::Rows rows;
  for (int i = 0; i < PQntuples(r); ++i) {
    sql::Rows::Row row;
    for (int c = 0; c < PQnfields(r); ++c) {
      if (PQgetisnull(r, i, c))
        row.emplace_back();
      else
        row.emplace_back(std::string(PQgetvalue(r, i, c), static_cast<std::size_t>(PQgetlength(r, i, c))));
    }
    rows.add(std::move(row));
  }
  return rows;
}

}  // namespace

Result<std::unique_ptr<PgConnection>> PgConnection::open(const ConnectInfo& info, const sql::Dialect* dialect,
                                                         steady::time_point deadline) {
  std::vector<const char*> keys, values;
  for (const auto& [k, v] : info.params) {
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  pg_conn* raw = PQconnectStartParams(keys.data(), values.data(), 0);
  if (!raw) return Status(errc::unavailable, "postgres backend: connecting to " + info.redacted_url + ": out of memory");
  std::unique_ptr<PgConnection> conn(new PgConnection(raw, info.redacted_url));
  conn->deadline_ = deadline;
  const std::string step = "connecting to " + info.redacted_url;
  if (PQstatus(raw) == CONNECTION_BAD) return conn->fail(step, PQerrorMessage(raw));
  // libpq's own loop: poll for what it asks until it is done.
  for (PostgresPollingStatusType polling = PGRES_POLLING_WRITING;;) {
    if (polling == PGRES_POLLING_OK) break;
    if (polling == PGRES_POLLING_FAILED) return conn->fail(step, PQerrorMessage(raw));
    if (Status s = conn->wait_socket(polling == PGRES_POLLING_WRITING, step); !s) return s;
    polling = PQconnectPoll(raw);
  }
  if (PQsetnonblocking(raw, 1) != 0) return conn->fail(step, PQerrorMessage(raw));
  // The server's notices (a table that already exists, ...) are not ours
  // to print.
  PQsetNoticeProcessor(raw, [](void*, const char*) {}, nullptr);
  if (dialect) {
    if (Status s = conn->prepare(*dialect); !s) return s;
  }
  return conn;
}

PgConnection::~PgConnection() { PQfinish(conn_); }

Status PgConnection::fail(std::string_view step, std::string why) {
  broken_ = true;
  while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
  return Status(errc::unavailable, "postgres backend: " + std::string(step) + ": " + why);
}

Status PgConnection::wait_socket(bool write, std::string_view step) {
  for (;;) {
    const int timeout = millis_until(deadline_);
    if (timeout == 0 && steady::now() >= deadline_)
      return fail(step, "no answer within ClientOptions::op_timeout");
    pollfd fd{PQsocket(conn_), static_cast<short>(POLLIN | (write ? POLLOUT : 0)), 0};
    if (fd.fd < 0) return fail(step, "no socket");
    const int n = ::poll(&fd, 1, timeout);
    if (n > 0) return {};
    if (n < 0 && errno != EINTR) return fail(step, "poll failed");
  }
}

Status PgConnection::flush(std::string_view step) {
  for (;;) {
    const int rc = PQflush(conn_);
    if (rc == 0) return {};
    if (rc < 0) return fail(step, PQerrorMessage(conn_));
    if (Status s = wait_socket(true, step); !s) return s;
    // Read what the server sent meanwhile, or it may stop reading from us.
    if (!PQconsumeInput(conn_)) return fail(step, PQerrorMessage(conn_));
  }
}

Result<pg_result*> PgConnection::next_result(std::string_view step) {
  while (PQisBusy(conn_)) {
    if (Status s = wait_socket(false, step); !s) return s;
    if (!PQconsumeInput(conn_)) return fail(step, PQerrorMessage(conn_));
  }
  return PQgetResult(conn_);
}

Status PgConnection::prepare(const sql::Dialect& dialect) {
  const std::string step = "preparing statements";
  if (PQenterPipelineMode(conn_) != 1) return fail(step, PQerrorMessage(conn_));
  names_.resize(sql::statement_count);
  for (std::size_t i = 0; i < sql::statement_count; ++i) {
    names_[i] = "dlock_" + std::to_string(i);
    const std::string text = numbered(dialect.sql(static_cast<sql::Stmt>(i)));
    if (!PQsendPrepare(conn_, names_[i].c_str(), text.c_str(), 0, nullptr)) return fail(step, PQerrorMessage(conn_));
  }
  if (!PQpipelineSync(conn_)) return fail(step, PQerrorMessage(conn_));
  if (Status s = flush(step); !s) return s;
  Status first;
  for (std::size_t i = 0; i < sql::statement_count; ++i) {
    auto r = next_result(step);
    if (!r) return r.status();
    if (PQresultStatus(*r) != PGRES_COMMAND_OK && first)
      first = to_status(*r, "preparing '" + std::string(sql::purpose(static_cast<sql::Stmt>(i))) + "'");
    PQclear(*r);
    auto end = next_result(step);
    if (!end) return end.status();
    if (*end) PQclear(*end);
  }
  auto sync = next_result(step);
  if (!sync) return sync.status();
  PQclear(*sync);
  return first;
}

Status PgConnection::write(std::span<const sql::Call> calls) {
  const std::string_view step = calls.empty() ? "" : sql::purpose(calls.front().statement);
  if (broken_) return fail(step, "the connection failed earlier");
  for (const sql::Call& call : calls) {
    std::vector<std::string> texts;
    texts.reserve(call.params.size());
    for (const sql::Param& p : call.params) {
      if (const auto* number = std::get_if<std::int64_t>(&p))
        texts.push_back(std::to_string(*number));
      else
        texts.emplace_back(std::get<std::string_view>(p));
    }
    std::vector<const char*> values;
    for (const auto& t : texts) values.push_back(t.c_str());
    if (!PQsendQueryPrepared(conn_, names_[static_cast<std::size_t>(call.statement)].c_str(),
                             static_cast<int>(values.size()), values.data(), nullptr, nullptr, 0))
      return fail(step, PQerrorMessage(conn_));
  }
  if (!PQpipelineSync(conn_)) return fail(step, PQerrorMessage(conn_));
  return flush(step);
}

Result<std::vector<sql::Rows>> PgConnection::read(std::span<const sql::Stmt> statements) {
  const std::string_view step = statements.empty() ? "" : sql::purpose(statements.front());
  aborted_before_ = false;
  if (broken_) return fail(step, "the connection failed earlier");
  std::vector<sql::Rows> out;
  out.reserve(statements.size());
  Status first;
  for (const sql::Stmt statement : statements) {
    auto r = next_result(step);
    if (!r) return r.status();
    if (!*r) return fail(step, "the server closed the connection");
    sql::Rows rows;
    switch (PQresultStatus(*r)) {
      case PGRES_TUPLES_OK:
        rows = rows_of(*r);
        break;
      case PGRES_COMMAND_OK:
        rows.changed = std::atoll(PQcmdTuples(*r));
        break;
      case PGRES_PIPELINE_ABORTED:
        break;  // an earlier statement failed: `first` says why
      default:
        if (first) {
          first = to_status(*r, sql::purpose(statement));
          // 25P02: a transaction an earlier batch left failed refused it.
          const char* code = PQresultErrorField(*r, PG_DIAG_SQLSTATE);
          aborted_before_ = code && std::string_view(code) == "25P02";
        }
        break;
    }
    PQclear(*r);
    out.push_back(std::move(rows));
    auto end = next_result(step);
    if (!end) return end.status();
    if (*end) PQclear(*end);
  }
  auto sync = next_result(step);
  if (!sync) return sync.status();
  if (*sync) PQclear(*sync);
  if (!first) return first;
  return out;
}

void PgConnection::end_failed_transaction() {
  // A failed transaction stays open (aborted) until it is ended.
  if (broken_ || PQtransactionStatus(conn_) == PQTRANS_IDLE) return;
  if (names_.empty()) {  // a plain connection's
    (void)exec("ROLLBACK", "rolling back");
    return;
  }
  const sql::Call end[] = {{sql::Stmt::rollback}};
  const sql::Stmt statements[] = {sql::Stmt::rollback};
  if (write(end)) (void)read(statements);
}

Result<sql::Rows> PgConnection::exec(const std::string& text, std::string_view step, std::string* sqlstate) {
  read_unanswered();
  if (!PQsendQuery(conn_, text.c_str())) return fail(step, PQerrorMessage(conn_));
  return finish_plain(step, sqlstate);
}

Result<sql::Rows> PgConnection::query(const std::string& text, std::span<const std::string> params,
                                      std::string_view step, std::string* sqlstate) {
  read_unanswered();
  std::vector<const char*> values;
  for (const auto& p : params) values.push_back(p.c_str());
  if (!PQsendQueryParams(conn_, text.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr, nullptr,
                         0))
    return fail(step, PQerrorMessage(conn_));
  return finish_plain(step, sqlstate);
}

Result<sql::Rows> PgConnection::query_prepared(const char* text, std::span<const std::string> params,
                                               std::string_view step, std::string* sqlstate) {
  if (Status s = send_prepared(text, params, step, sqlstate, /*may_prepare=*/true); !s) return s;
  return finish_plain(step, sqlstate);
}

void PgConnection::query_prepared_async(const char* text, std::span<const std::string> params, std::string step,
                                        std::function<void(Result<sql::Rows>)> answer) {
  // Not prepared here yet: sent as it is (preparing would wait for the server).
  Status s = send_prepared(text, params, step, nullptr, /*may_prepare=*/false);
  if (s) s = flush(step);
  if (!s) return answer(std::move(s));
  sent_unanswered([this, step = std::move(step), answer = std::move(answer)] {
    auto out = read_plain(step, nullptr);
    const bool ok = out.ok();
    answer(std::move(out));
    return ok;
  });
}

Status PgConnection::prepare_plain(const char* text, std::string_view step) {
  if (plain_names_.count(text)) return {};
  read_unanswered();
  const std::string name = "dlock_plain_" + std::to_string(plain_names_.size());
  if (!PQsendPrepare(conn_, name.c_str(), text, 0, nullptr)) return fail(step, PQerrorMessage(conn_));
  if (auto prepared = finish_plain(step, nullptr); !prepared) return prepared.status();
  plain_names_.emplace(text, name);
  return {};
}

Status PgConnection::send_prepared(const char* text, std::span<const std::string> params, std::string_view step,
                                   std::string* sqlstate, bool may_prepare) {
  read_unanswered();
  std::vector<const char*> values;
  for (const auto& p : params) values.push_back(p.c_str());
  auto known = plain_names_.find(text);
  if (known == plain_names_.end() && !may_prepare) {
    if (!PQsendQueryParams(conn_, text, static_cast<int>(values.size()), nullptr, values.data(), nullptr, nullptr, 0))
      return fail(step, PQerrorMessage(conn_));
    return {};
  }
  if (known == plain_names_.end()) {
    if (Status s = prepare_plain(text, step); !s) {
      if (sqlstate) *sqlstate = "";
      return s;
    }
    known = plain_names_.find(text);
  }
  if (!PQsendQueryPrepared(conn_, known->second.c_str(), static_cast<int>(values.size()), values.data(), nullptr,
                           nullptr, 0))
    return fail(step, PQerrorMessage(conn_));
  return {};
}

Result<sql::Rows> PgConnection::finish_plain(std::string_view step, std::string* sqlstate) {
  if (Status s = flush(step); !s) return s;
  return read_plain(step, sqlstate);
}

Result<sql::Rows> PgConnection::read_plain(std::string_view step, std::string* sqlstate) {
  if (broken_) return fail(step, "the connection failed earlier");
  sql::Rows last;
  Status first;
  for (;;) {
    auto r = next_result(step);
    if (!r) return r.status();
    if (!*r) break;
    const auto status = PQresultStatus(*r);
    if (status == PGRES_TUPLES_OK) {
      last = rows_of(*r);
    } else if (status == PGRES_COMMAND_OK) {
      last.changed = std::atoll(PQcmdTuples(*r));
    } else if (first) {
      first = to_status(*r, step);
      if (sqlstate) {
        const char* code = PQresultErrorField(*r, PG_DIAG_SQLSTATE);
        *sqlstate = code ? code : "";
      }
    }
    PQclear(*r);
  }
  if (!first) return first;
  return last;
}

Status PgConnection::wait_notifications(steady::time_point until, int stop_fd, bool& stopped,
                                        const std::function<void(std::string_view)>& each) {
  pollfd fds[] = {{PQsocket(conn_), POLLIN, 0}, {stop_fd, POLLIN, 0}};
  if (fds[0].fd < 0) return fail("listening", "no socket");
  const int n = ::poll(fds, 2, millis_until(until));
  if (n < 0 && errno != EINTR) return fail("listening", "poll failed");
  if (fds[1].revents) {
    stopped = true;
    return {};
  }
  if (!PQconsumeInput(conn_)) return fail("listening", PQerrorMessage(conn_));
  while (PGnotify* note = PQnotifies(conn_)) {
    each(note->extra ? note->extra : "");
    PQfreemem(note);
  }
  if (PQstatus(conn_) == CONNECTION_BAD) return fail("listening", PQerrorMessage(conn_));
  return {};
}

}  // namespace dlock::detail::postgres
