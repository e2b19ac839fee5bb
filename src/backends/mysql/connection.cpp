#include "backends/mysql/connection.h"

#include "backends/mysql/errors.h"
#include "backends/mysql/spelling.h"

#include <mysql.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>

namespace dlock::detail::mysql {
namespace {

int millis_until(steady::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - steady::now()).count();
  return static_cast<int>(std::clamp<std::int64_t>(left, 0, 60'000));
}

// Whole seconds, at least 1: what the server's timeouts take.
std::string seconds(std::chrono::milliseconds d) {
  return std::to_string(std::max<std::int64_t>(1, (d.count() + 999) / 1000));
}

sql::Rows rows_of(MYSQL_RES* result) {
  sql::Rows rows;
  const unsigned columns = mysql_num_fields(result);
  while (MYSQL_ROW r = mysql_fetch_row(result)) {  // stored: no I/O
    const unsigned long* lengths = mysql_fetch_lengths(result);
    sql::Rows::Row row;
    for (unsigned c = 0; c < columns; ++c) {
      if (r[c])
        row.emplace_back(std::string(r[c], lengths[c]));
      else
        row.emplace_back();
    }
    rows.add(std::move(row));
  }
  return rows;
}

}  // namespace

Result<std::unique_ptr<MyConnection>> MyConnection::open(const ConnectInfo& info, const sql::Dialect* dialect,
                                                         steady::time_point deadline, bool without_database) {
  const std::string step = "connecting to " + info.redacted_url;
  MYSQL* raw = mysql_init(nullptr);
  if (!raw) return Status(errc::unavailable, "mysql backend: " + step + ": out of memory");
  std::unique_ptr<MyConnection> conn(new MyConnection(raw, dialect, info.redacted_url));
  conn->deadline_ = deadline;
  // The library's own timeouts (whole seconds) only back up the deadline.
  const unsigned backup = static_cast<unsigned>(std::stoul(seconds(info.op_timeout)));
  mysql_options(raw, MYSQL_OPT_NONBLOCK, nullptr);
  mysql_options(raw, MYSQL_OPT_CONNECT_TIMEOUT, &backup);
  mysql_options(raw, MYSQL_OPT_READ_TIMEOUT, &backup);
  mysql_options(raw, MYSQL_OPT_WRITE_TIMEOUT, &backup);
  mysql_options(raw, MYSQL_SET_CHARSET_NAME, "utf8mb4");
  const unsigned tcp = MYSQL_PROTOCOL_TCP;
  mysql_options(raw, MYSQL_OPT_PROTOCOL, &tcp);
  for (const auto& [key, value] : info.tls) {
    const my_bool yes = 1;
    if (key == "ssl-ca") mysql_options(raw, MYSQL_OPT_SSL_CA, value.c_str());
    else if (key == "ssl-capath") mysql_options(raw, MYSQL_OPT_SSL_CAPATH, value.c_str());
    else if (key == "ssl-cert") mysql_options(raw, MYSQL_OPT_SSL_CERT, value.c_str());
    else if (key == "ssl-key") mysql_options(raw, MYSQL_OPT_SSL_KEY, value.c_str());
    else if (key == "ssl-crl") mysql_options(raw, MYSQL_OPT_SSL_CRL, value.c_str());
    else if (key == "ssl-cipher") mysql_options(raw, MYSQL_OPT_SSL_CIPHER, value.c_str());
    else if (key == "tls-version") mysql_options(raw, MARIADB_OPT_TLS_VERSION, value.c_str());
    else if (key == "ssl" && value == "1") mysql_options(raw, MYSQL_OPT_SSL_ENFORCE, &yes);
    else if (key == "ssl-verify-server-cert" && value == "1")
      mysql_options(raw, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &yes);
  }
  MYSQL* ret = nullptr;
  const unsigned long flags = CLIENT_MULTI_STATEMENTS | CLIENT_FOUND_ROWS;
  int status = mysql_real_connect_start(&ret, raw, info.host.c_str(), info.user.c_str(),
                                        info.password.empty() ? nullptr : info.password.c_str(),
                                        without_database ? nullptr : info.database.c_str(), info.port, nullptr, flags);
  if (Status s = conn->drive(status, [&](int ready) { return mysql_real_connect_cont(&ret, raw, ready); }, step); !s)
    return s;
  if (!ret) {
    Status s = conn->error(step);
    // MariaDB answers a client without TLS where TLS is required
    // (--require-secure-transport, a user's REQUIRE SSL) as it answers a
    // wrong password.
    const auto has = [&](std::string_view option) {
      return std::any_of(info.tls.begin(), info.tls.end(), [&](const auto& kv) { return kv.first == option; });
    };
    if (mysql_errno(raw) == 1045 && info.tls.empty())
      return Status(s.code(), s.message() + " — if the server or the user requires TLS, add ssl=1&ssl-ca=FILE");
    // A user made with REQUIRE X509 (or ISSUER, SUBJECT) is refused the
    // same way without a client certificate; a certificate the server does
    // not trust ends the handshake without a word.
    if (mysql_errno(raw) == 1045 && !has("ssl-cert"))
      return Status(s.code(), s.message() + " — if the user requires a client certificate, add ssl-cert=FILE&ssl-key=FILE");
    if (mysql_errno(raw) == 2013 && has("ssl-cert"))
      return Status(s.code(), s.message() + " — the server may have refused the client certificate (not signed by a CA it trusts?)");
    return s;
  }

  // READ COMMITTED: every read sees what committed before it (the fence
  // row's lock orders the rest). UTC: {now} reads the clock without time
  // zone rules. A row lock is waited for at most op_timeout.
  std::string setup =
      "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; SET time_zone = '+00:00'; "
      "SET innodb_lock_wait_timeout = " + seconds(info.op_timeout);
  // MariaDB also ends a session left idle inside a transaction (a client
  // stopped half way through one) after twice op_timeout; MySQL cannot.
  if (std::string_view(mysql_get_server_info(raw)).find("MariaDB") != std::string_view::npos)
    setup += "; SET idle_transaction_timeout = " + seconds(2 * info.op_timeout);
  auto done = conn->exec(setup, "setting the session up");
  if (!done) return done.status();
  return conn;
}

MyConnection::~MyConnection() {
  // A connection dropped half way through a call must not block here: its
  // further reads and writes fail at once.
  if (broken_) mariadb_cancel(mysql_);
  mysql_close(mysql_);
}

Status MyConnection::fail(std::string_view step, std::string why) {
  broken_ = true;
  return Status(errc::unavailable, "mysql backend: " + std::string(step) + ": " + why);
}

Status MyConnection::error(std::string_view step) {
  bool broken = false;
  Status s = to_status(mysql_errno(mysql_), mysql_error(mysql_), step, broken);
  if (broken) broken_ = true;
  return s;
}

template <class Cont>
Status MyConnection::drive(int status, Cont cont, std::string_view step) {
  while (status != 0) {
    const int timeout = millis_until(deadline_);
    if (timeout == 0) return fail(step, "no answer within ClientOptions::op_timeout");
    pollfd fd{mysql_get_socket(mysql_), 0, 0};
    if (status & MYSQL_WAIT_READ) fd.events |= POLLIN;
    if (status & MYSQL_WAIT_WRITE) fd.events |= POLLOUT;
    if (status & MYSQL_WAIT_EXCEPT) fd.events |= POLLPRI;
    int wait = timeout;
    if (status & MYSQL_WAIT_TIMEOUT)
      wait = std::min<int>(wait, static_cast<int>(mysql_get_timeout_value_ms(mysql_)));
    const int n = ::poll(&fd, 1, wait);
    if (n < 0 && errno != EINTR) return fail(step, "poll failed");
    int ready = 0;
    if (n > 0) {
      if (fd.revents & (POLLIN | POLLHUP | POLLERR)) ready |= MYSQL_WAIT_READ;
      if (fd.revents & (POLLOUT | POLLHUP | POLLERR)) ready |= MYSQL_WAIT_WRITE;
      if (fd.revents & POLLPRI) ready |= MYSQL_WAIT_EXCEPT;
    } else if (n == 0 && (status & MYSQL_WAIT_TIMEOUT) && wait < timeout) {
      ready = MYSQL_WAIT_TIMEOUT;
    } else {
      continue;
    }
    status = cont(ready);
  }
  return {};
}

Result<std::vector<sql::Rows>> MyConnection::exec(std::string_view text, const std::vector<sql::Param>& params,
                                                  std::string_view step) {
  return exec(with_params(text, params), step);
}

Result<std::vector<sql::Rows>> MyConnection::exec(const std::string& text, std::string_view step) {
  read_unanswered();
  if (Status s = send_text(text, step); !s) return s;
  auto out = read_results(step);
  if (!out) end_failed_transaction();
  return out;
}

void MyConnection::exec_async(std::string_view text, const std::vector<sql::Param>& params, std::string step,
                              std::function<void(Result<std::vector<sql::Rows>>)> answer) {
  read_unanswered();
  if (Status s = send_text(with_params(text, params), step); !s) return answer(std::move(s));
  sent_unanswered([this, step = std::move(step), answer = std::move(answer)] {
    auto out = read_results(step);
    const bool ok = out.ok();
    answer(std::move(out));
    return ok;
  });
}

Status MyConnection::send_text(const std::string& text, std::string_view step) {
  if (broken_) return fail(step, "the connection failed earlier");
  int rc = 0;
  const int status = mysql_send_query_start(&rc, mysql_, text.data(), text.size());
  if (Status s = drive(
          status, [&](int ready) { return mysql_send_query_cont(&rc, mysql_, ready); }, step);
      !s)
    return s;
  if (rc != 0) return error(step);
  return {};
}

Result<std::vector<sql::Rows>> MyConnection::read_results(std::string_view step) {
  if (broken_) return fail(step, "the connection failed earlier");
  my_bool failed_read = 0;
  int status = mysql_read_query_result_start(&failed_read, mysql_);
  if (Status s = drive(
          status, [&](int ready) { return mysql_read_query_result_cont(&failed_read, mysql_, ready); }, step);
      !s)
    return s;
  int rc = failed_read ? 1 : 0;
  std::vector<sql::Rows> out;
  Status failed;
  for (bool first = true;; first = false) {
    if (!first) {
      status = mysql_next_result_start(&rc, mysql_);
      if (Status s = drive(
              status, [&](int ready) { return mysql_next_result_cont(&rc, mysql_, ready); }, step);
          !s)
        return s;
      if (rc < 0) break;  // no more results
    }
    if (rc != 0) {
      failed = error(step);
      break;
    }
    MYSQL_RES* result = nullptr;
    status = mysql_store_result_start(&result, mysql_);
    if (Status s = drive(
            status, [&](int ready) { return mysql_store_result_cont(&result, mysql_, ready); }, step);
        !s)
      return s;
    sql::Rows rows;
    if (result) {
      rows = rows_of(result);
      mysql_free_result(result);
    } else if (mysql_field_count(mysql_) != 0) {
      failed = error(step);
      break;
    } else {
      rows.changed = static_cast<std::int64_t>(mysql_affected_rows(mysql_));
    }
    out.push_back(std::move(rows));
    if (!mysql_more_results(mysql_)) break;
  }
  if (!failed) return failed;
  return out;
}

void MyConnection::end_failed_transaction() {
  // The server stops a multi-statement text at its first error and may
  // leave a transaction open: end it.
  if (broken_) return;
  int ignored = 0;
  const int status = mysql_real_query_start(&ignored, mysql_, "ROLLBACK", 8);
  (void)drive(
      status, [&](int ready) { return mysql_real_query_cont(&ignored, mysql_, ready); }, "rolling back");
}

Status MyConnection::write(std::span<const sql::Call> calls) {
  const std::string_view step = calls.empty() ? "" : sql::purpose(calls.front().statement);
  std::string text;
  for (const sql::Call& call : calls) {
    if (!text.empty()) text += ";\n";
    text += with_params(dialect_->sql(call.statement), call.params);
  }
  return send_text(text, step);
}

Result<std::vector<sql::Rows>> MyConnection::read(std::span<const sql::Stmt> statements) {
  const std::string_view step = statements.empty() ? "" : sql::purpose(statements.front());
  auto out = read_results(step);
  if (!out) return out.status();
  if (out->size() != statements.size())
    return Status(errc::internal, "mysql backend: " + std::string(step) + ": " + std::to_string(out->size()) +
                                      " results for " + std::to_string(statements.size()) + " statements");
  return out;
}

}  // namespace dlock::detail::mysql
