// dlock/mutex.h — a mutex shared by every process that uses the same store.
//
// dlock::Mutex models the standard TimedLockable requirements, so
// std::unique_lock, std::scoped_lock and std::lock_guard work with it. It is
// reentrant by default (like std::recursive_timed_mutex): the hold count is
// kept per (lock name, thread) across all Mutex objects of one Client, and
// re-entry costs no round trip.
//
// Why a fencing token: a lock alone cannot protect a resource. A holder can
// pause (GC, swap, SIGSTOP) past its lease, another process takes the lock,
// and the first one wakes up and writes believing it still holds it. Pass
// token() with every write and have the resource refuse a token lower than
// the highest it has seen; tokens strictly increase per lock name across all
// clients of a store.
//
// Thread-safety: one Mutex object may be used from many threads; each thread
// holds or doesn't hold independently. Blocking calls: lock(), try_lock_for(),
// try_lock_until() wait; try_lock() makes one attempt; all of them make
// remote calls bounded by ClientOptions::op_timeout.
//
// Lease loss: when the client learns that the lease is gone (a renewal was
// refused, renewals failed until the lease ran out, a fixed lease expired),
// lost() turns true and stop_token() is signalled. lost() also compares the
// lease's local deadline with the clock on every call, so it is exact even
// while the lease keeper waits for a stalled store; stop_token() is
// signalled by the keeper, up to ClientOptions::op_timeout later in that
// case. The hold stays counted until unlock(); unlock() then releases
// nothing remote.
//
// Example:
//   auto client = dlock::connect("file:///var/lib/myapp/locks");
//   auto stock = client->mutex("stock:1001");
//   {
//     std::unique_lock hold(stock);
//     write_stock(stock.token(), stock.stop_token());
//   }
#pragma once

#include <dlock/hold.h>
#include <dlock/options.h>
#include <dlock/status.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <stop_token>
#include <string>
#include <type_traits>

namespace dlock {

namespace detail {
class ClientState;

// The deadline `timeout` from now: negative counts as zero, more than ~100
// years as forever.
template <class Rep, class Period>
std::chrono::steady_clock::time_point deadline_after(const std::chrono::duration<Rep, Period>& timeout) {
  using steady = std::chrono::steady_clock;
  if (timeout <= timeout.zero()) return steady::now();
  if (std::chrono::duration<double>(timeout).count() > 3.0e9) return steady::time_point::max();
  return steady::now() + std::chrono::ceil<steady::duration>(timeout);
}

// `deadline` on the steady clock (other clocks: the time left from now).
template <class Clock, class Duration>
std::chrono::steady_clock::time_point steady_deadline(const std::chrono::time_point<Clock, Duration>& deadline) {
  if constexpr (std::is_same_v<Clock, std::chrono::steady_clock>)
    return std::chrono::time_point_cast<std::chrono::steady_clock::duration>(deadline);
  else
    return deadline_after(deadline - Clock::now());
}
}  // namespace detail

class Mutex {
 public:
  Mutex(Mutex&&) noexcept = default;
  Mutex& operator=(Mutex&&) noexcept = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;
  // Destroying a Mutex does not release holds: they belong to the thread
  // and are released by unlock() (or when the Client goes away).
  ~Mutex() = default;

  // Blocks until the lock is held by the calling thread.
  // Throws Error: unavailable (store unreachable), would_deadlock
  // (non-reentrant and already held by this thread).
  void lock();

  // One attempt; true if the calling thread now holds the lock.
  bool try_lock();

  // Waits at most `timeout` (negative counts as zero; more than ~100 years
  // as forever); true if acquired.
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
    return acquire_until(detail::deadline_after(timeout));
  }

  // Waits until `deadline` on its own clock; true if acquired.
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    return acquire_until(detail::steady_deadline(deadline));
  }

  // Drops one hold; the last one releases the lock and wakes a waiter.
  // Never throws: a failed release or an unlock by a thread that does not
  // hold the lock is counted and otherwise ignored. Use unlock_checked() to
  // see the outcome.
  //
  // On redis://, zk://, postgres://, mysql:// and etcd:// the release is
  // sent and not waited for: the store runs it before anything the calling
  // thread sends after it on this client (on etcd, whose gRPC calls are not
  // ordered, that thread's next call waits for its answer first), and its
  // answer is read later — a failure is counted in stats().failed_releases
  // and logged. The lock is free once the store has run it, which another
  // process may not see for a moment after unlock() returns; a release that
  // never arrives is a lease expiry (ZooKeeper: the client deletes the node
  // once the ensemble answers again, or the session ends; etcd: the delete
  // is sent again while no member answers). file:// and sqlite:// release
  // before returning. docs/api.md, "Releases that don't wait".
  void unlock() noexcept;

  // unlock() that reports, and so waits for the store's answer on every
  // backend: not_owner if the calling thread does not hold the lock
  // (nothing is changed), lock_lost if the lease was already gone,
  // unavailable if the store could not be told (the lease then runs out).
  Status unlock_checked() noexcept;

  // The fencing token of the calling thread's hold. Throws not_owner if the
  // calling thread does not hold the lock.
  std::uint64_t token() const;

  // True if the calling thread holds the lock but its lease is gone.
  bool lost() const noexcept;

  // Signalled when the calling thread's hold is lost (never signalled by a
  // normal unlock). Throws not_owner if the calling thread does not hold it.
  std::stop_token stop_token() const;

  bool held_by_current_thread() const noexcept;
  // Holds of the calling thread: 0 if it does not hold the lock.
  std::size_t hold_count() const noexcept;

  // Asynchronous acquisition (see dlock/hold.h): the lock is held by the
  // Hold it completes with, not by a thread; waiting blocks no thread (the
  // client's one async thread attempts, and the store's notification wakes
  // it). Each form takes a std::stop_token: once it is signalled the
  // acquisition ends with errc::cancelled, and its place in the store's
  // queue is gone before it completes. Destroying the client completes
  // what is pending with errc::unavailable. The hold is not reentrant, and
  // a thread holding this Mutex excludes it (and vice versa).
  //
  // Three ways to be told, each with async_lock (waits as long as it
  // takes) and async_try_lock_for/_until (an empty Hold if the deadline
  // passed first; negative timeouts count as zero: one attempt):
  //   - a std::future<Hold>; get() throws dlock::Error on failure;
  //   - an AsyncCallback(Status, Hold), run once on the client's async thread;
  //   - an Asio completion token, with dlock/asio.h included:
  //       dlock::Hold hold = co_await m.async_lock(asio::use_awaitable);
  // Throws invalid_argument at once for an empty callback.
  //
  // Example:
  //   auto hold = stock.async_try_lock_for(2s).get();
  //   if (hold) write_stock(hold.token(), hold.stop_token());
  std::future<Hold> async_lock(std::stop_token stop = {}) {
    return Hold::future_of(starter(std::chrono::steady_clock::time_point::max(), std::move(stop)));
  }
  template <class Rep, class Period>
  std::future<Hold> async_try_lock_for(const std::chrono::duration<Rep, Period>& timeout, std::stop_token stop = {}) {
    return Hold::future_of(starter(detail::deadline_after(timeout), std::move(stop)));
  }
  template <class Clock, class Duration>
  std::future<Hold> async_try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline,
                                         std::stop_token stop = {}) {
    return Hold::future_of(starter(detail::steady_deadline(deadline), std::move(stop)));
  }
  void async_lock(AsyncCallback done, std::stop_token stop = {}) {
    starter(std::chrono::steady_clock::time_point::max(), std::move(stop))(std::move(done));
  }
  template <class Rep, class Period>
  void async_try_lock_for(const std::chrono::duration<Rep, Period>& timeout, AsyncCallback done,
                          std::stop_token stop = {}) {
    starter(detail::deadline_after(timeout), std::move(stop))(std::move(done));
  }
  template <detail::completion_token Token>
  auto async_lock(Token&& token, std::stop_token stop = {}) {
    return detail::async_adapter<std::decay_t<Token>>::initiate(
        std::forward<Token>(token), starter(std::chrono::steady_clock::time_point::max(), std::move(stop)));
  }
  template <class Rep, class Period, detail::completion_token Token>
  auto async_try_lock_for(const std::chrono::duration<Rep, Period>& timeout, Token&& token,
                          std::stop_token stop = {}) {
    return detail::async_adapter<std::decay_t<Token>>::initiate(
        std::forward<Token>(token), starter(detail::deadline_after(timeout), std::move(stop)));
  }

  // Admin: frees the lock whoever holds it (for a stuck holder). The
  // holder's next renewal reports it lost. Throws on store errors.
  void force_unlock();

  const std::string& name() const noexcept { return name_; }
  const MutexOptions& options() const noexcept { return options_; }

 private:
  friend class Client;
  Mutex(std::shared_ptr<detail::ClientState> client, std::string name, MutexOptions options);
  bool acquire_until(std::chrono::steady_clock::time_point deadline);
  // Starts an asynchronous acquisition by `deadline`; keeps what it needs
  // (the client, the name, the options), so it may run after this Mutex
  // is gone (an Asio token that starts when awaited).
  detail::AsyncStart starter(std::chrono::steady_clock::time_point deadline, std::stop_token stop) const;

  std::shared_ptr<detail::ClientState> client_;
  std::string name_;
  MutexOptions options_;
};

}  // namespace dlock
