// dlock/multi_lock.h — several locks taken as one: all or nothing, and
// without deadlock between processes that take overlapping sets.
//
// Client::multi_lock({"stock:1001", "stock:1002"}) makes a handle over one
// Mutex per name (the same locks as client->mutex(name)). lock() takes them
// in one global order — by name — whatever order they were listed in, so two
// processes taking overlapping sets never wait for each other in a circle.
// A timed or try form that cannot have them all by its deadline, or an
// error (e.g. unavailable) part-way, releases those it took before it
// returns false or throws: the caller never ends up holding some of them.
// (Apache Curator's InterProcessMultiLock also rolls back, but takes its
// locks in the caller's order.)
//
// It is TimedLockable, so std::unique_lock works. Holds belong to the
// calling thread and are reentrant per lock, as with Mutex; unlock()
// releases every lock of the set once. Works on every backend.
//
// Blocking: lock() waits for all; try_lock() makes one attempt per lock;
// try_lock_for()/try_lock_until() share one deadline across the set. Each
// remote call is bounded by ClientOptions::op_timeout.
//
// Fencing and loss: tokens() gives each lock's fencing token, in names()
// order (sorted); lost() is true if any of the calling thread's holds is
// lost, and stop_token() is signalled when one is.
//
// Thread-safety: one MultiLock may be used from many threads; each thread
// holds or doesn't hold independently.
//
// Example:
//   auto both = client->multi_lock({"account:" + from, "account:" + to});
//   std::unique_lock hold(both);
//   transfer(from, to, amount, both.tokens());
#pragma once

#include <dlock/mutex.h>

#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

namespace dlock {

namespace detail {
struct MultiLockStops;
}

class MultiLock {
 public:
  MultiLock(MultiLock&&) noexcept;
  MultiLock& operator=(MultiLock&&) noexcept;
  MultiLock(const MultiLock&) = delete;
  MultiLock& operator=(const MultiLock&) = delete;
  ~MultiLock();  // holds belong to the thread, as for Mutex

  // Blocks until the calling thread holds every lock of the set.
  void lock();
  // One attempt at each; true if the calling thread now holds them all.
  bool try_lock();
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
    return acquire_until(detail::deadline_after(timeout));
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    return acquire_until(detail::steady_deadline(deadline));
  }
  // Drops one hold of every lock of the set (never throws).
  void unlock() noexcept;
  // unlock() that reports the first failure (every lock is released either
  // way): not_owner if the calling thread did not hold the set, lock_lost if
  // a lease had been lost, unavailable if the store could not be told.
  Status unlock_checked() noexcept;

  // Each lock's fencing token, in names() order. Throws not_owner if the
  // calling thread does not hold the set.
  std::vector<std::uint64_t> tokens() const;
  // True if the calling thread holds the set and any hold's lease is gone.
  bool lost() const noexcept;
  // Signalled when any of the calling thread's holds is lost. Throws
  // not_owner if the calling thread does not hold the set.
  std::stop_token stop_token() const;
  bool held_by_current_thread() const noexcept;

  // The lock names, sorted: the order they are taken in.
  const std::vector<std::string>& names() const noexcept { return names_; }

 private:
  friend class Client;
  MultiLock(std::vector<Mutex> locks, std::vector<std::string> names);
  bool acquire_until(std::chrono::steady_clock::time_point deadline);
  // Releases the first `n` locks of the set, last taken first.
  Status unlock_first(std::size_t n) noexcept;

  std::vector<Mutex> locks_;  // in names_ order
  std::vector<std::string> names_;
  std::unique_ptr<detail::MultiLockStops> stops_;
};

}  // namespace dlock
