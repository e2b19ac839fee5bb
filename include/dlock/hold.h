// dlock/hold.h — a hold that belongs to no thread: what the asynchronous
// acquisitions (Mutex::async_lock, Semaphore::async_acquire,
// Election::async_campaign) give.
//
// Why not the thread: an asynchronous acquisition completes on another
// thread, and a coroutine may resume on any thread, so a hold tied to the
// thread that asked (as Mutex::lock()'s is) would belong to nobody in
// particular. A Hold is a move-only handle, like std::unique_lock owning
// its mutex: the lock is held while the Hold lives (or until unlock()),
// whichever thread moves it around. In the store it has an owner id of its
// own, so it excludes every other holder of the name — other processes,
// other Holds, and threads of this very client that lock() the same Mutex
// (a thread holding the Mutex waits for the Hold, and an async_lock()
// waits for the thread: wait for its future while holding the lock and it
// waits for itself). It is not reentrant: each async_lock() is one more
// acquisition.
//
// The lease, the fencing token and loss work as for Mutex: token() goes
// with every write to the protected resource; lost() and stop_token() tell
// when the lease or session is gone; the client's lease keeper renews it.
//
// Thread-safety: a Hold is one object; don't use one Hold from two threads
// at once without synchronisation (moving it between threads is fine).
// unlock() and the destructor never throw; a Hold keeps its Client alive.
//
// Example:
//   auto hold = stock.async_lock().get();   // or co_await stock.async_lock(asio::use_awaitable)
//   write_stock(hold.token(), hold.stop_token());
//   // released when `hold` goes (or hold.unlock())
#pragma once

#include <dlock/status.h>

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <stop_token>
#include <string>
#include <type_traits>

namespace dlock {

namespace detail {
class ClientState;
struct HeldLock;
}  // namespace detail

class Hold;

// What an asynchronous acquisition's callback gets, once: ok and the Hold;
// ok and an empty Hold (a try_ form's deadline passed); or the error —
// cancelled (its stop_token fired), unavailable (the store, or the client
// was destroyed first), ... — and an empty Hold. It runs on the client's
// async thread: it must not block (don't wait there for another
// acquisition's future); it may start acquisitions and release Holds.
using AsyncCallback = std::function<void(Status, Hold)>;

namespace detail {
// Starts one asynchronous acquisition that reports to its argument.
using AsyncStart = std::function<void(AsyncCallback)>;
}  // namespace detail

class Hold {
 public:
  // Holds nothing.
  Hold() noexcept = default;
  Hold(Hold&& other) noexcept = default;
  // Releases what this holds first (as unlock()).
  Hold& operator=(Hold&& other) noexcept;
  Hold(const Hold&) = delete;
  Hold& operator=(const Hold&) = delete;
  // Releases (as unlock()).
  ~Hold();

  // Whether it holds something (a try_ form whose deadline passed gives an
  // empty Hold). A lost hold still counts until unlock().
  bool owns_lock() const noexcept { return hold_ != nullptr; }
  explicit operator bool() const noexcept { return owns_lock(); }

  // The lock's, permit's or election's name; empty if it holds nothing.
  const std::string& name() const noexcept;

  // The fencing token. Throws not_owner if it holds nothing.
  std::uint64_t token() const;

  // True if it holds something whose lease or session is gone.
  bool lost() const noexcept;

  // Signalled when the hold is lost (never by unlock()). Throws not_owner
  // if it holds nothing.
  std::stop_token stop_token() const;

  // Releases, and wakes a waiter; afterwards it holds nothing. Never throws.
  // For a Mutex on redis:// the release is sent and not waited for, as
  // Mutex::unlock()'s; a failure is counted in stats().failed_releases.
  // Holding nothing, it does nothing.
  void unlock() noexcept;

  // unlock() that waits for the store and reports: not_owner if it holds
  // nothing, lock_lost if the lease was already gone, unavailable if the
  // store could not be told (the lease then runs out).
  Status unlock_checked() noexcept;

 private:
  friend class detail::ClientState;
  friend class Mutex;
  friend class Semaphore;
  friend class Election;
  Hold(std::shared_ptr<detail::ClientState> client, std::shared_ptr<detail::HeldLock> hold) noexcept;
  // A future for the acquisition `start` makes: a Hold (empty if a try_
  // form's deadline passed) or a dlock::Error.
  static std::future<Hold> future_of(const detail::AsyncStart& start);

  std::shared_ptr<detail::ClientState> client_;
  std::shared_ptr<detail::HeldLock> hold_;
};

namespace detail {

// The completion-token adapter: dlock/asio.h specialises it for Asio's
// tokens (asio::use_awaitable, use_future, a handler, ...). initiate(token,
// start) starts the acquisition the token's way.
template <class Token, class = void>
struct async_adapter {
  static constexpr bool enabled = false;
};

template <class Token>
concept completion_token = async_adapter<std::decay_t<Token>>::enabled;

}  // namespace detail

}  // namespace dlock
