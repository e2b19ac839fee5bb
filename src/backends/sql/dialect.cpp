#include "backends/sql/dialect.h"

#include <stdexcept>
#include <utility>

namespace dlock::detail::sql {
namespace {

// Markers a Dialect fills in: {now} (the store's clock in unix ms),
// {starts_with} (name starts with ?1), {text} (a text column's type), {key}
// (the type of a text in a primary key), {suffix} (after a CREATE TABLE),
// {begin}.
//
// dlock_holds    one row per hold: a mutex's or a leader's holder, a
//                SharedMutex's writer or each reader, each permit out.
//                kind: mutex | rw | leader | permit; mode: x (exclusive),
//                w, r. A row whose expires_at has passed is free to take.
// dlock_fences   per lock: the last fencing token issued (rows are never
//                deleted, so tokens keep increasing after the holds go),
//                and the permits a semaphore was declared with. Locking
//                this row orders everything done to one lock.
// dlock_counts   a Counter's value (kind counter) and width in bytes, a
//                Latch's count (kind latch), whether a Barrier is open
//                (kind barrier, 1 = open).
// dlock_waiters  the queue: one row per waiting thread, in `since` order,
//                kept alive by the waiter's attempts (expires_at), with
//                where to wake it (`wake`: its client's address) and what
//                a hold handed to it carries (lease, data, holder).
constexpr std::string_view schema_template = R"sql(
CREATE TABLE IF NOT EXISTS dlock_holds (
  name       {key} NOT NULL,
  kind       {key} NOT NULL,
  owner      {key} NOT NULL,
  mode       {key} NOT NULL,
  token      BIGINT NOT NULL,
  expires_at BIGINT NOT NULL,
  data       {text} NOT NULL,
  holder     {text} NOT NULL,
  PRIMARY KEY (name, kind, owner, mode)
){suffix};
CREATE TABLE IF NOT EXISTS dlock_fences (
  name       {key} NOT NULL,
  kind       {key} NOT NULL,
  last_token BIGINT NOT NULL,
  permits    BIGINT NOT NULL,
  PRIMARY KEY (name, kind)
){suffix};
CREATE TABLE IF NOT EXISTS dlock_waiters (
  name       {key} NOT NULL,
  kind       {key} NOT NULL,
  owner      {key} NOT NULL,
  mode       {text} NOT NULL,
  since      BIGINT NOT NULL,
  expires_at BIGINT NOT NULL,
  wake       {text} NOT NULL,
  lease      BIGINT NOT NULL,
  data       {text} NOT NULL,
  holder     {text} NOT NULL,
  PRIMARY KEY (name, kind, owner)
){suffix};
CREATE TABLE IF NOT EXISTS dlock_counts (
  name       {key} NOT NULL,
  kind       {key} NOT NULL,
  value      BIGINT NOT NULL,
  width      BIGINT NOT NULL,
  PRIMARY KEY (name, kind)
){suffix};
CREATE TABLE IF NOT EXISTS dlock_ping (
  id BIGINT PRIMARY KEY NOT NULL,
  at BIGINT NOT NULL
){suffix}
)sql";

struct Text {
  Stmt statement;
  std::string_view purpose;
  std::string_view sql;
};

// In Stmt's order. Parameters: name ?1 and kind ?2 unless said otherwise.
constexpr Text texts[] = {
    {Stmt::begin, "starting a transaction", "{begin}"},
    {Stmt::commit, "committing", "COMMIT"},
    {Stmt::rollback, "rolling back", "ROLLBACK"},
    // ?3 permits declared (0: not a semaphore) -> last_token, permits. Locks
    // the lock's row until the transaction ends.
    {Stmt::lock_fence, "locking the lock's fence row",
     "INSERT INTO dlock_fences (name, kind, last_token, permits) VALUES (?1, ?2, 0, ?3) "
     "ON CONFLICT (name, kind) DO UPDATE SET last_token = dlock_fences.last_token "
     "RETURNING last_token, permits"},
    // -> owner, mode, token, ms left (<= 0: expired)
    {Stmt::holders, "reading the holders", "SELECT owner, mode, token, expires_at - {now} FROM dlock_holds "
                                           "WHERE name = ?1 AND kind = ?2"},
    // -> owner, mode, ms waited, ms left; first come first
    {Stmt::waiters, "reading the queue", "SELECT owner, mode, {now} - since, expires_at - {now} FROM dlock_waiters "
                                         "WHERE name = ?1 AND kind = ?2 ORDER BY since, owner"},
    // ?3 permits declared
    {Stmt::bump_token, "issuing a fencing token",
     "UPDATE dlock_fences SET last_token = last_token + 1, permits = ?3 WHERE name = ?1 AND kind = ?2"},
    {Stmt::drop_expired, "dropping expired holds",
     "DELETE FROM dlock_holds WHERE name = ?1 AND kind = ?2 AND expires_at <= {now}"},
    {Stmt::drop_dead_waiters, "dropping dead waiters",
     "DELETE FROM dlock_waiters WHERE name = ?1 AND kind = ?2 AND expires_at <= {now}"},
    // ?3 owner, ?4 mode, ?5 token, ?6 lease ms, ?7 data, ?8 holder
    {Stmt::insert_hold, "writing the hold",
     "INSERT INTO dlock_holds (name, kind, owner, mode, token, expires_at, data, holder) "
     "VALUES (?1, ?2, ?3, ?4, ?5, {now} + ?6, ?7, ?8) ON CONFLICT (name, kind, owner, mode) DO UPDATE SET "
     "token = excluded.token, expires_at = excluded.expires_at, data = excluded.data, holder = excluded.holder"},
    // ?3 owner, ?4 mode, ?5 ms to live, ?6 wake address, ?7 lease ms,
    // ?8 data, ?9 holder. Keeps `since`. A new entry's `since` is later than
    // every other of its lock's (now, or the last one's + 1 ms): two entries
    // never tie, so the queue's order is the order they came in.
    {Stmt::enqueue, "queueing",
     "INSERT INTO dlock_waiters (name, kind, owner, mode, since, expires_at, wake, lease, data, holder) "
     "VALUES (?1, ?2, ?3, ?4, (SELECT CASE WHEN MAX(since) IS NULL OR MAX(since) < {now} THEN {now} "
     "ELSE MAX(since) + 1 END FROM dlock_waiters WHERE name = ?1 AND kind = ?2), "
     "{now} + ?5, ?6, ?7, ?8, ?9) ON CONFLICT (name, kind, owner) DO UPDATE SET "
     "mode = excluded.mode, expires_at = excluded.expires_at, wake = excluded.wake, lease = excluded.lease, "
     "data = excluded.data, holder = excluded.holder"},
    // ?3 owner
    {Stmt::dequeue, "leaving the queue", "DELETE FROM dlock_waiters WHERE name = ?1 AND kind = ?2 AND owner = ?3"},
    // ?3 owner, ?4 mode, ?5 token -> ms left (a row only if it was ours)
    {Stmt::release, "releasing", "DELETE FROM dlock_holds WHERE name = ?1 AND kind = ?2 AND owner = ?3 AND mode = ?4 "
                                 "AND token = ?5 RETURNING expires_at - {now}"},
    // ?3 how many -> owner, mode, wake of the first live waiters
    {Stmt::heads, "finding whom to wake",
     "SELECT owner, mode, wake FROM dlock_waiters WHERE name = ?1 AND kind = ?2 AND expires_at > {now} "
     "ORDER BY since, owner LIMIT ?3"},
    // Hands a free lock to the first live waiter: its hold, with the next
    // token (bump_handed then moves the fence row to it).
    {Stmt::hand_over, "handing over to the next in line",
     "INSERT INTO dlock_holds (name, kind, owner, mode, token, expires_at, data, holder) "
     "SELECT w.name, w.kind, w.owner, w.mode, f.last_token + 1, {now} + w.lease, w.data, w.holder "
     "FROM dlock_waiters w JOIN dlock_fences f ON f.name = w.name AND f.kind = w.kind "
     "WHERE w.name = ?1 AND w.kind = ?2 AND w.expires_at > {now} AND NOT EXISTS "
     "(SELECT 1 FROM dlock_holds h WHERE h.name = ?1 AND h.kind = ?2 AND h.expires_at > {now}) "
     "ORDER BY w.since, w.owner LIMIT 1"},
    {Stmt::bump_handed, "issuing the handed-over token",
     "UPDATE dlock_fences SET last_token = last_token + 1 WHERE name = ?1 AND kind = ?2 AND EXISTS "
     "(SELECT 1 FROM dlock_holds h WHERE h.name = ?1 AND h.kind = ?2 AND h.token = dlock_fences.last_token + 1)"},
    {Stmt::dequeue_holders, "taking the new holder out of the queue",
     "DELETE FROM dlock_waiters WHERE name = ?1 AND kind = ?2 AND owner IN "
     "(SELECT owner FROM dlock_holds WHERE name = ?1 AND kind = ?2 AND expires_at > {now})"},
    // ?3 owner, ?4 mode -> token, ms left of the caller's live hold
    {Stmt::own_hold, "reading our hold",
     "SELECT token, expires_at - {now} FROM dlock_holds WHERE name = ?1 AND kind = ?2 AND owner = ?3 "
     "AND mode = ?4 AND expires_at > {now}"},
    // ?3 owner: a hold handed to a waiter that left without taking it
    {Stmt::drop_own, "dropping a hold not taken",
     "DELETE FROM dlock_holds WHERE name = ?1 AND kind = ?2 AND owner = ?3"},
    // ?1 lease ms, ?2 name, ?3 kind, ?4 owner, ?5 mode, ?6 token
    {Stmt::extend, "extending a lease",
     "UPDATE dlock_holds SET expires_at = {now} + ?1 WHERE name = ?2 AND kind = ?3 AND owner = ?4 AND mode = ?5 "
     "AND token = ?6 AND expires_at > {now}"},
    {Stmt::force_release, "force-releasing", "DELETE FROM dlock_holds WHERE name = ?1 AND kind = ?2"},
    // ?1 prefix -> name, kind, owner, mode, token, ms left, data, holder
    {Stmt::list, "listing holds",
     "SELECT name, kind, owner, mode, token, expires_at - {now}, data, holder FROM dlock_holds "
     "WHERE {starts_with} AND expires_at > {now} ORDER BY name, kind, token"},
    // -> data of the live holder
    {Stmt::leader, "reading the leader",
     "SELECT data FROM dlock_holds WHERE name = ?1 AND kind = ?2 AND expires_at > {now}"},
    {Stmt::ping, "ping",
     "INSERT INTO dlock_ping (id, at) VALUES (1, {now}) ON CONFLICT (id) DO UPDATE SET at = excluded.at"},
    // Where RETURNING is missing (Dialect::stand_in): what lock_fence returns.
    {Stmt::read_fence, "reading the lock's fence row",
     "SELECT last_token, permits FROM dlock_fences WHERE name = ?1 AND kind = ?2"},
    // ... and what release returns (read under the fence row's lock).
    {Stmt::read_release, "reading the hold to release",
     "SELECT expires_at - {now} FROM dlock_holds WHERE name = ?1 AND kind = ?2 AND owner = ?3 AND mode = ?4 "
     "AND token = ?5"},
    // ?3 value and ?4 width if missing -> value, width. Locks the row until
    // the transaction ends.
    {Stmt::lock_count, "locking the count",
     "INSERT INTO dlock_counts (name, kind, value, width) VALUES (?1, ?2, ?3, ?4) "
     "ON CONFLICT (name, kind) DO UPDATE SET value = dlock_counts.value RETURNING value, width"},
    // -> value, width (no row: never written)
    {Stmt::read_count, "reading the count", "SELECT value, width FROM dlock_counts WHERE name = ?1 AND kind = ?2"},
    // ?3 value
    {Stmt::set_count, "writing the count", "UPDATE dlock_counts SET value = ?3 WHERE name = ?1 AND kind = ?2"},
};
static_assert(std::size(texts) == statement_count);

std::string fill(std::string_view text, const DialectSpelling& d) {
  const std::pair<std::string_view, std::string_view> markers[] = {
      {"{now}", d.now_ms},           {"{starts_with}", d.starts_with},
      {"{text}", d.text_type},       {"{key}", d.key_type.empty() ? d.text_type : d.key_type},
      {"{suffix}", d.table_suffix},  {"{begin}", d.begin}};
  std::string out(text);
  for (const auto& [marker, value] : markers)
    for (auto at = out.find(marker); at != std::string::npos; at = out.find(marker, at + value.size()))
      out.replace(at, marker.size(), value);
  return out;
}

}  // namespace

std::string table_list() {
  std::string out;
  for (std::string_view t : table_names) out += (out.empty() ? "" : ", ") + std::string(t);
  return out;
}

std::string_view purpose(Stmt statement) { return texts[static_cast<std::size_t>(statement)].purpose; }

Dialect::Dialect(const DialectSpelling& spelling)
    : name_(spelling.name), schema_(fill(schema_template, spelling)), returning_(spelling.returning) {
  for (std::size_t i = 0; i < statement_count; ++i) {
    if (texts[i].statement != static_cast<Stmt>(i)) throw std::logic_error("sql texts out of order");
    texts_[i] = fill(texts[i].sql, spelling);
  }
  for (const Override& o : spelling.overrides) texts_[static_cast<std::size_t>(o.statement)] = fill(o.sql, spelling);
  if (!returning_) {
    for (std::size_t i = 0; i < statement_count; ++i) {
      std::string& text = texts_[i];
      if (auto at = text.find(" RETURNING "); at != std::string::npos && stand_in(static_cast<Stmt>(i)))
        text.erase(at);
    }
  }
  if (!spelling.notify_heads.empty()) {
    std::string wrapped(spelling.notify_heads);
    auto at = wrapped.find("%s");
    wrapped.replace(at, 2, sql(Stmt::heads));
    texts_[static_cast<std::size_t>(Stmt::heads)] = std::move(wrapped);
    database_wakes_ = true;
  }
}

std::optional<Dialect::StandIn> Dialect::stand_in(Stmt statement) const {
  if (returning_) return std::nullopt;
  if (statement == Stmt::lock_fence) return StandIn{Stmt::read_fence, false};  // the row it made or locked
  if (statement == Stmt::release) return StandIn{Stmt::read_release, true};   // the row it will delete
  if (statement == Stmt::lock_count) return StandIn{Stmt::read_count, false};  // the row it made or locked
  return std::nullopt;
}

}  // namespace dlock::detail::sql
