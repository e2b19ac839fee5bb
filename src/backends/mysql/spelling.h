// spelling.h — how MySQL and MariaDB spell dlock's SQL: the lock table
// recipe's dialect (backends/sql), how a batch's parameters are written
// into its text, and session mode's statements. Also used by
// bench/mysql_raw.cpp, which sends the same texts raw.
#pragma once

#include "backends/sql/connection.h"
#include "backends/sql/dialect.h"

#include <string>
#include <string_view>
#include <vector>

namespace dlock::detail::mysql {

// MySQL spells upserts ON DUPLICATE KEY UPDATE (which locks the row it
// finds, as ON CONFLICT does), and has no RETURNING.
inline constexpr sql::Override overrides[] = {
    {sql::Stmt::lock_fence,
     "INSERT INTO dlock_fences (name, kind, last_token, permits) VALUES (?1, ?2, 0, ?3) "
     "ON DUPLICATE KEY UPDATE last_token = last_token"},
    {sql::Stmt::insert_hold,
     "INSERT INTO dlock_holds (name, kind, owner, mode, token, expires_at, data, holder) "
     "VALUES (?1, ?2, ?3, ?4, ?5, {now} + ?6, ?7, ?8) ON DUPLICATE KEY UPDATE "
     "token = VALUES(token), expires_at = VALUES(expires_at), data = VALUES(data), holder = VALUES(holder)"},
    // INSERT ... SELECT: MySQL refuses a VALUES subquery on the table it
    // inserts into.
    {sql::Stmt::enqueue,
     "INSERT INTO dlock_waiters (name, kind, owner, mode, since, expires_at, wake, lease, data, holder) "
     "SELECT ?1, ?2, ?3, ?4, CASE WHEN MAX(since) IS NULL OR MAX(since) < {now} THEN {now} ELSE MAX(since) + 1 END, "
     "{now} + ?5, ?6, ?7, ?8, ?9 FROM dlock_waiters WHERE name = ?1 AND kind = ?2 ON DUPLICATE KEY UPDATE "
     "mode = VALUES(mode), expires_at = VALUES(expires_at), wake = VALUES(wake), lease = VALUES(lease), "
     "data = VALUES(data), holder = VALUES(holder)"},
    {sql::Stmt::ping, "INSERT INTO dlock_ping (id, at) VALUES (1, {now}) ON DUPLICATE KEY UPDATE at = VALUES(at)"},
    {sql::Stmt::lock_count,
     "INSERT INTO dlock_counts (name, kind, value, width) VALUES (?1, ?2, ?3, ?4) "
     "ON DUPLICATE KEY UPDATE value = value"},
};

inline constexpr sql::DialectSpelling spelling = {
    .name = "mysql",
    .begin = "START TRANSACTION",
    // The session's time zone is UTC (connection.cpp).
    .now_ms = "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)",
    // On VARBINARY, LEFT and LENGTH count bytes.
    .starts_with = "LEFT(name, LENGTH(?1)) = ?1",
    .text_type = "BLOB",
    .table_suffix = " ENGINE=InnoDB",
    .notify_heads = "",
    // Names are at most 512 bytes; four such keys fit InnoDB's 3072.
    .key_type = "VARBINARY(512)",
    .returning = false,
    .overrides = overrides,
};

// `text` with every ?N replaced by params[N-1] as a literal: numbers in
// decimal, texts as X'hex' (byte for byte, nothing to escape).
inline std::string with_params(std::string_view text, const std::vector<sql::Param>& params) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size() + 64);
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '?' || i + 1 >= text.size() || text[i + 1] < '1' || text[i + 1] > '9') {
      out += text[i];
      continue;
    }
    std::size_t n = 0;
    while (i + 1 < text.size() && text[i + 1] >= '0' && text[i + 1] <= '9') n = n * 10 + (text[++i] - '0');
    if (n > params.size()) continue;
    if (const auto* number = std::get_if<std::int64_t>(&params[n - 1])) {
      out += std::to_string(*number);
      continue;
    }
    out += "X'";
    for (unsigned char c : std::get<std::string_view>(params[n - 1])) {
      out += digits[c >> 4];
      out += digits[c & 15];
    }
    out += '\'';
  }
  return out;
}

// Session mode (session_locks.cpp). A name's id in dlock_session_keys
// (?1 name); on a duplicate, LAST_INSERT_ID(id) hands back the existing
// row's id.
inline constexpr std::string_view session_key_of =
    "INSERT INTO dlock_session_keys (name) VALUES (?1) ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id); "
    "SELECT LAST_INSERT_ID()";
// (Not a MariaDB SEQUENCE, though one would bring lock+unlock to
// 0.97-0.99x bare GET_LOCK pairs against 0.78x with this upsert: on 10.11
// a server killed within about a second of a sequence taking its next
// block of values comes back without that block and hands the same values
// out again — measured, even with innodb_flush_log_at_trx_commit=1. A
// token must never repeat.)
// One round trip: the lock (?1 the server's lock name, waiting up to ?2 ms
// in the server's queue), and if it was granted the next token of ?3 (the
// dlock name) and the lease (?4 whole seconds) as the session's idle limit
// -> got (1: granted), token.
inline constexpr std::string_view session_lock =
    "SELECT GET_LOCK(?1, ?2 / 1000) INTO @dlock_got; "
    "INSERT INTO dlock_fences (name, kind, last_token, permits) SELECT ?3, 'session', LAST_INSERT_ID(1), 0 "
    "FROM DUAL WHERE @dlock_got = 1 ON DUPLICATE KEY UPDATE last_token = LAST_INSERT_ID(last_token + 1); "
    "SET SESSION wait_timeout = IF(@dlock_got = 1, ?4, @@SESSION.wait_timeout); "
    "SELECT @dlock_got, IF(@dlock_got = 1, LAST_INSERT_ID(), NULL)";
// ?1 the server's lock name -> 1 if this session held it.
inline constexpr std::string_view session_unlock =
    "SELECT RELEASE_LOCK(?1); SET SESSION wait_timeout = @@GLOBAL.wait_timeout";

}  // namespace dlock::detail::mysql
