// session_locks.h — ?mode=session on a SQL database: the database's own
// locks, owned by a connection and dropped by the server when that
// connection ends (PostgreSQL's advisory locks, MySQL's GET_LOCK).
//
// Written once here (session_locks.cpp); a database supplies how to take,
// wait for and give up one lock on one connection (SessionConnection).
//
// Names: each name gets an integer id from a table of its own
// (dlock_session_keys: an identity column, so two names never share one,
// unlike a hash), cached per client; the database's lock is named after
// that id.
//
// Fencing: dlock_fences (kind 'session') bumped on the holder's connection
// right after the lock is granted — durable, strictly increasing.
//
// Lease: the holding connection is told to end when left idle for the
// lease (idle_session_timeout, wait_timeout), so the server itself drops a
// lock whose holder stopped (SIGSTOP, a long pause) or, with a fixed lease,
// whose lease is over. A live watchdog holder's renewal is a round trip on
// each held lock's connection (every lease / 3), which keeps it from idling
// out; a connection that fails means the server has dropped that lock, and
// the hold is reported lost. A dead holder: its connection closes and the
// server drops its locks at once.
//
// Releasing: unlock() sends the database's unlock and returns; the
// connection waits, with its answer unread, for the thread that sent it,
// whose next call takes it (reading that answer first), so what the thread
// does next runs after its release. unlock_checked() waits.
//
// Waiting: a waiter blocks in the database's own lock wait on a connection
// of its own, bounded by the time it has left: the server orders the
// waiters and wakes one per release, and the lock is the waiter's when the
// call returns (Waiter::take_grant).
//
// Limits: Mutex only; each held lock and each waiter pins a connection;
// transaction-pooling proxies (PgBouncer's transaction mode, ProxySQL's
// multiplexing) break session locks.
#pragma once

#include "core/driver.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::detail::sql {

// One connection of session mode: a held lock's, a waiter's, or an idle one.
class SessionConnection {
 public:
  virtual ~SessionConnection() = default;
  virtual void set_deadline(steady::time_point deadline) noexcept = 0;
  // Whether the connection failed (and with it any lock it held).
  virtual bool broken() const noexcept = 0;

  // The id of `name` in dlock_session_keys, made if missing.
  virtual Result<std::int64_t> key_of(const std::string& name) = 0;
  // Takes the lock of `key` for `request`: at once or not at all when
  // `wait` is zero, else waiting in the server's queue for up to `wait`.
  // Granted: the next fencing token of the name, with the connection set
  // to end when left idle for request.lease. nullopt: not granted (in
  // time), the connection left as it was.
  virtual Result<std::optional<std::int64_t>> lock(std::int64_t key, const LockRequest& request,
                                                   std::chrono::milliseconds wait) = 0;
  // Gives up the lock of `key` and the idle limit: false if this
  // connection did not hold it.
  virtual Result<bool> unlock(std::int64_t key, std::string_view step) = 0;
  // unlock() without waiting: `answer` gets the outcome when it is read —
  // by the next call on this connection, or read_unanswered(). The server
  // runs a connection's statements in the order they are sent.
  virtual void unlock_async(std::int64_t key, std::string step, std::function<void(Result<bool>)> answer) = 0;
  // Reads the answers unlock_async() left unread.
  virtual void read_unanswered() = 0;
  // One round trip: a renewal.
  virtual Status check(std::string_view step) = 0;
  // Ends whatever session holds the lock of `key` (its holder's locks go
  // with it); returns once the lock is free or after about `wait`.
  virtual Status force_release(std::int64_t key, std::chrono::milliseconds wait, std::string_view step) = 0;
  // The held locks whose names start with `prefix`, sorted by name.
  virtual Result<std::vector<LockInfo>> list(std::string_view prefix) = 0;
};

// Opens a connection that ends its calls by `deadline`.
using OpenSessionConnection = std::function<Result<std::unique_ptr<SessionConnection>>(steady::time_point)>;

Result<std::unique_ptr<Backend>> make_session_backend(OpenSessionConnection open, std::chrono::milliseconds op_timeout);

}  // namespace dlock::detail::sql
