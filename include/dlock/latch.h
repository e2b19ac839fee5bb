// dlock/latch.h — std::latch with timed waits, shared by every process that
// uses the same store: a count that only goes down; waiters are released
// when it reaches 0, and from then on it stays open.
//
// Client::latch(name, count) opens the latch; the first client to open a
// name sets its count, later ones use the count it has then (whatever their
// `count`). Once at 0 a latch stays at 0; to reuse a name, pick a new one
// (e.g. with a round number).
//
// Blocking: count_down() and try_wait() make one or two round trips, each
// bounded by ClientOptions::op_timeout. wait() blocks until the count is 0;
// wait_for()/wait_until() also return false at their deadline (negative
// timeouts are zero: one read). Waiting costs no polling: the store
// notifies a waiter when the count changes (plus a re-read at least every
// 500 ms as a safety net).
//
// Errors: Error with unavailable if the store did not answer within
// op_timeout (a count_down that failed so may or may not have counted);
// invalid_argument for a negative count or n, or a count beyond int32.
//
// Backends: zk:// (the node <root>/<name> holds the remaining count in
// Apache Curator SharedCount's encoding, a 4-byte big-endian int; names
// share one space with Mutex and Counter: give them different names);
// redis:// (a hash under the name's hash tag; reaching 0 sends one message
// to each waiter); file:// (the remaining count is the Counter of the same
// name, waiters woken by inotify). Others refuse Client::latch() with
// errc::unsupported.
//
// Thread-safety: a Latch may be used from any number of threads.
//
// Example:
//   auto ready = client->latch("deploy/42/ready", 3);  // 3 services must report
//   ready.count_down();                                // in each service
//   if (!ready.wait_for(std::chrono::minutes(2))) abort_deploy();
#pragma once

#include <dlock/mutex.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace dlock {

class Latch {
 public:
  Latch(Latch&&) noexcept = default;
  Latch& operator=(Latch&&) noexcept = default;
  Latch(const Latch&) = delete;
  Latch& operator=(const Latch&) = delete;
  ~Latch() = default;

  // Lowers the count by n (>= 0), never below 0; waiters are released when
  // it reaches 0.
  void count_down(std::int64_t n = 1);
  // Whether the count is 0 now (one read, no waiting).
  bool try_wait();
  // Blocks until the count is 0.
  void wait();
  // count_down(n), then wait().
  void arrive_and_wait(std::int64_t n = 1);

  // Blocks until the count is 0 (true) or `timeout` has passed (false).
  template <class Rep, class Period>
  bool wait_for(const std::chrono::duration<Rep, Period>& timeout) {
    return wait_until_steady(detail::deadline_after(timeout));
  }
  // Blocks until the count is 0 (true) or `deadline` on its own clock (false).
  template <class Clock, class Duration>
  bool wait_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    return wait_until_steady(detail::steady_deadline(deadline));
  }

  const std::string& name() const noexcept { return name_; }

 private:
  friend class Client;
  Latch(std::shared_ptr<detail::ClientState> client, std::string name, std::int64_t count);
  bool wait_until_steady(std::chrono::steady_clock::time_point deadline);

  std::shared_ptr<detail::ClientState> client_;
  std::string name_;
  std::int64_t count_;  // what this handle creates the latch with if it is missing
};

}  // namespace dlock
