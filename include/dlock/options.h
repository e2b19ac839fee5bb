// dlock/options.h — options for a client and for each mutex.
//
// Plain structs with commented defaults; use designated initialisers:
//   auto m = client->mutex("orders", {.lease = 10s, .lease_mode = dlock::LeaseMode::fixed});
// Every option is checked before any I/O; a bad value is refused with
// errc::invalid_argument and a message naming the field.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string_view>

namespace dlock {

// How much a log message matters (ClientOptions::log).
enum class LogLevel {
  debug,    // detail for tracing a problem
  info,     // a normal event worth a line: a connection restored
  warning,  // something the service should know: a lock lost, a release that failed, a connection lost
  error,    // dlock could not do what it must (a background step failed for good)
};

// For messages: "debug", "info", "warning", "error".
std::string_view to_string(LogLevel level) noexcept;

struct ClientOptions {
  // Longest one call to the store may take (connecting included) before it
  // fails with errc::unavailable. Must be > 0.
  std::chrono::milliseconds op_timeout{5'000};
  // Longest pause between two acquire attempts while waiting. Waiters on
  // backends with notifications sleep until notified and use this only as a
  // safety net; backends without notifications (sqlite) back off with jitter
  // from 1 ms up to this. Must be > 0.
  std::chrono::milliseconds max_backoff{100};
  // Receives dlock's log messages: a lock lost (and why), a release that
  // failed, a connection to the store lost or restored. Called on any
  // dlock thread, the lease keeper's and the store client's included: it
  // must be thread-safe, should return quickly and must not call back into
  // the client. Messages never contain passwords or owner tokens. Empty
  // (the default): dlock writes nothing anywhere.
  std::function<void(LogLevel, std::string_view message)> log = {};
};

enum class LeaseMode {
  // The client renews the lease every renew_interval while the holder's
  // process lives, so the lock is held until unlock(). If the process dies
  // or stops renewing (paused, partitioned), the store frees the lock after
  // `lease`.
  watchdog,
  // The lease is never renewed: the lock expires `lease` after it was
  // acquired even if the holder still works. lost() turns true then.
  fixed,
};

struct MutexOptions {
  // How long the store keeps the lock without hearing from the holder.
  // Must be > 0 and at most 24 h.
  std::chrono::milliseconds lease{30'000};
  LeaseMode lease_mode = LeaseMode::watchdog;
  // watchdog mode: how often the lease is renewed. 0 means lease / 3.
  // Must be < lease.
  std::chrono::milliseconds renew_interval{0};
  // true: the thread holding the lock may lock it again; each lock() needs
  // its own unlock() (a hold count, like std::recursive_mutex).
  // false: locking it again from the holding thread throws would_deadlock.
  bool reentrant = true;
  // true: waiters get the lock in the order they started waiting (FIFO), on
  // backends that keep a queue (docs/backends.md, "Primitives on each
  // backend"; zk:// and etcd:// are always in order); a newcomer never
  // barges past them.
  // false: any waiter may win a release (faster under contention).
  // Backends without a queue refuse true with errc::unsupported.
  bool fair = false;
  // Not fair: a waiter that has waited this long goes before any newcomer,
  // and a release hands the lock straight to it (its wake-up carries the
  // lock: no extra round trip); until then any contender may win a
  // release. So no waiter waits much longer than this plus the holds
  // queued before it (Go's sync.Mutex starvation mode, across processes).
  // 0: always in order, as `fair`. Must be 0..1h. Backends that keep a
  // queue honour it (those with `fair`; zk:// and etcd:// are always in
  // order); how each hands over: docs/backends.md.
  std::chrono::milliseconds max_barging_wait{1};
};

}  // namespace dlock
