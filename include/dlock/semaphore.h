// dlock/semaphore.h — a counting semaphore shared by every process that uses
// the same store: at most `permits` permits are out at once, each held by a
// live owner; when its owner dies (its session ends) a permit comes back.
//
// Client::semaphore(name, permits) makes a handle. Permits belong to the
// handle, not to a thread: any thread may release a permit the handle holds
// (as with std::counting_semaphore), and destroying the handle gives back
// every permit it still holds. A handle may hold several permits.
//
// It is also Lockable and TimedLockable (lock = acquire one permit, unlock =
// release one), so std::unique_lock and std::scoped_lock work with it. With
// permits = 1 it is a mutex that is not reentrant — acquiring it again
// through the same handle waits for the permit the handle already holds,
// like std::binary_semaphore — and that any thread may unlock.
//
// Blocking: acquire() waits until a permit is free; try_acquire() makes one
// attempt; try_acquire_for()/try_acquire_until() wait at most until their
// deadline (negative timeouts are zero). Every remote step is bounded by
// ClientOptions::op_timeout: a store that does not answer is
// errc::unavailable, never a hang. Waiters are woken by the store (no
// polling), with a re-read every 500 ms as a safety net.
//
// Loss: a permit dies with the holder's session. When the client learns
// its session was lost (zk://: per the URL's lost_on policy), lost() turns
// true and stop_token() is signalled; release() then reports lock_lost.
//
// Permits: every handle on one name must use the same `permits`. On zk://
// (as with Apache Curator's InterProcessSemaphoreV2) nothing in the store
// records it, a handle enforces its own number; on redis:// the store
// records the first count declared while any permit of the name is out
// or its last token is kept, and an acquire declaring another count fails
// with invalid_argument naming both.
//
// Errors: invalid_argument for a bad name, permits < 1 or above int32, or
// release(n) with n < 1; not_owner for release(n) of more permits than the
// handle holds (nothing is released); unavailable when the store did not
// answer within op_timeout.
//
// Backends: zk:// (Curator's InterProcessSemaphoreV2 layout, so Curator and
// dlock share one semaphore; with 1 permit it is Curator's
// InterProcessSemaphoreMutex):
//   <root>/<name>/locks/_c_<uuid>-lock-<seq>    a mutex serialising takers
//   <root>/<name>/leases/_c_<uuid>-lease-<seq>  one ephemeral node per permit
// redis://: each permit is a leased entry (options.lease, renewed with the
// client's locks), so a dead holder's permit comes back after its lease;
// a release wakes one queued waiter per free permit.
// file:// (one entry per permit out in the file <name>.permits, kept by the
// holder's lease and a kernel lock, so a dead holder's permit is back at
// once; the store records the first `permits` declared for the name and
// refuses a handle with another with invalid_argument naming both).
// Others refuse Client::semaphore() with errc::unsupported.
//
// Thread-safety: a Semaphore may be used from any number of threads.
//
// Example:
//   auto crawlers = client->semaphore("crawl/example.com", 3);  // 3 at a time, fleet-wide
//   std::unique_lock permit(crawlers);
//   crawl(crawlers.stop_token());
#pragma once

#include <dlock/hold.h>
#include <dlock/mutex.h>
#include <dlock/status.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>

namespace dlock {

namespace detail {
struct PermitBook;
}

class Semaphore {
 public:
  Semaphore(Semaphore&&) noexcept;
  Semaphore& operator=(Semaphore&&) noexcept;
  Semaphore(const Semaphore&) = delete;
  Semaphore& operator=(const Semaphore&) = delete;
  // Gives back every permit the handle still holds (errors are ignored:
  // a permit the store could not be told about dies with the session).
  ~Semaphore();

  // Blocks until the handle holds one more permit.
  void acquire();
  // One attempt; true if the handle now holds one more permit.
  bool try_acquire();
  // Waits at most `timeout`; true if a permit was acquired.
  template <class Rep, class Period>
  bool try_acquire_for(const std::chrono::duration<Rep, Period>& timeout) {
    return acquire_until(detail::deadline_after(timeout));
  }
  // Waits until `deadline` on its own clock; true if a permit was acquired.
  template <class Clock, class Duration>
  bool try_acquire_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    return acquire_until(detail::steady_deadline(deadline));
  }

  // Asynchronous acquisition of one permit, as Mutex::async_lock (see
  // there and dlock/hold.h): the permit belongs to the Hold it completes
  // with — not to this handle (held() does not count it, release() does
  // not give it back; the Hold does, when it goes). Needs a store that
  // leases permits (redis://, file://, sqlite://, postgres://, mysql://);
  // zk:// throws unsupported.
  std::future<Hold> async_acquire(std::stop_token stop = {}) {
    return Hold::future_of(starter(std::chrono::steady_clock::time_point::max(), std::move(stop)));
  }
  template <class Rep, class Period>
  std::future<Hold> async_try_acquire_for(const std::chrono::duration<Rep, Period>& timeout,
                                          std::stop_token stop = {}) {
    return Hold::future_of(starter(detail::deadline_after(timeout), std::move(stop)));
  }
  void async_acquire(AsyncCallback done, std::stop_token stop = {}) {
    starter(std::chrono::steady_clock::time_point::max(), std::move(stop))(std::move(done));
  }
  template <class Rep, class Period>
  void async_try_acquire_for(const std::chrono::duration<Rep, Period>& timeout, AsyncCallback done,
                             std::stop_token stop = {}) {
    starter(detail::deadline_after(timeout), std::move(stop))(std::move(done));
  }
  template <detail::completion_token Token>
  auto async_acquire(Token&& token, std::stop_token stop = {}) {
    return detail::async_adapter<std::decay_t<Token>>::initiate(
        std::forward<Token>(token), starter(std::chrono::steady_clock::time_point::max(), std::move(stop)));
  }

  // Gives back n of the permits this handle holds, newest first. Throws
  // invalid_argument (n < 1) or not_owner (the handle holds fewer than n),
  // changing nothing; what the store answers is ignored (see release_checked).
  void release(std::ptrdiff_t n = 1);
  // release() that reports instead of throwing: also lock_lost if a permit
  // was already lost, unavailable if the store could not be told (the
  // permit then comes back when the session ends). The permits are the
  // handle's no longer either way.
  Status release_checked(std::ptrdiff_t n = 1) noexcept;

  // Lockable / TimedLockable: one permit.
  void lock() { acquire(); }
  bool try_lock() { return try_acquire(); }
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
    return try_acquire_for(timeout);
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    return try_acquire_until(deadline);
  }
  void unlock() noexcept { (void)release_checked(1); }

  // Permits this handle holds now.
  std::ptrdiff_t held() const noexcept;
  // Permits out now, held by anyone (one read of the store).
  std::ptrdiff_t in_use();
  // The fencing token of the newest permit the handle holds (strictly
  // increasing across the permits of one name). Throws not_owner if it holds none.
  std::uint64_t token() const;
  // True if a permit the handle holds was lost.
  bool lost() const noexcept;
  // Signalled when a permit the handle holds is lost. Throws not_owner if
  // it holds none.
  std::stop_token stop_token() const;

  const std::string& name() const noexcept { return name_; }
  std::ptrdiff_t max() const noexcept { return permits_; }

 private:
  friend class Client;
  Semaphore(std::shared_ptr<detail::ClientState> client, std::string name, std::ptrdiff_t permits,
            MutexOptions options);
  bool acquire_until(std::chrono::steady_clock::time_point deadline);
  // As Mutex::starter; throws unsupported where permits are not leased.
  detail::AsyncStart starter(std::chrono::steady_clock::time_point deadline, std::stop_token stop) const;

  std::shared_ptr<detail::ClientState> client_;
  std::string name_;
  std::ptrdiff_t permits_;
  MutexOptions options_;
  std::unique_ptr<detail::PermitBook> book_;
};

}  // namespace dlock
