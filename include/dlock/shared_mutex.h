// dlock/shared_mutex.h — a read-write lock shared by every process that uses
// the same store: many readers at once, or one writer.
//
// dlock::SharedMutex models the standard SharedTimedLockable requirements,
// so std::unique_lock (write) and std::shared_lock (read) work with it.
// Waiters are served in arrival order: a reader that arrives after a
// waiting writer waits for that writer (writers do not starve). Each hold
// — write or read — is reentrant per thread like Mutex's. A thread holding
// it shared cannot upgrade: lock() then throws would_deadlock. A thread
// holding the write lock may take it shared too on redis:// (a downgrade:
// release the write lock and keep reading, with no writer in between); on
// other stores lock_shared() then throws would_deadlock.
//
// A SharedMutex and a Mutex of the same name are different locks. On
// zk:// it is Apache Curator's InterProcessReadWriteLock (nodes __READ__ and
// __WRIT__ in one sequence under the lock's node), so Java services using
// Curator on the same path share it. On redis:// the writer, the readers
// (leased entries) and one FIFO queue of waiters live under the name's hash
// tag; a writer's release wakes the readers queued before the next writer
// (one message each) or that writer. On file:// it is the file <name>.rw,
// OFD read/write byte locks and a lease per holder; a writer that waits
// holds later readers back. Backends without it refuse
// Client::shared_mutex() with errc::unsupported.
//
// Fencing: token() is the token of the calling thread's hold. Every hold,
// read or write, takes the next token of the name, so a writer's token is
// greater than that of every hold granted before it; a reader's token is
// greater than every earlier writer's. Readers hold concurrently, so a
// resource fenced by tokens should accept a reader's token only for reads.
// Lease loss, lost() and stop_token() are as for Mutex.
//
// Thread-safety, blocking and timeouts: as Mutex.
//
// Example:
//   auto config = client->shared_mutex("config");
//   { std::shared_lock read(config); use(load()); }
//   { std::unique_lock write(config); store(config.token()); }
#pragma once

#include <dlock/mutex.h>

namespace dlock {

class SharedMutex {
 public:
  SharedMutex(SharedMutex&&) noexcept = default;
  SharedMutex& operator=(SharedMutex&&) noexcept = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;
  ~SharedMutex() = default;  // holds belong to the thread, as for Mutex

  // Exclusive (write): the same contract as Mutex's.
  void lock();
  bool try_lock();
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
    return acquire_until(false, detail::deadline_after(timeout));
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    return acquire_until(false, detail::steady_deadline(deadline));
  }
  void unlock() noexcept;
  Status unlock_checked() noexcept;

  // Shared (read).
  void lock_shared();
  bool try_lock_shared();
  template <class Rep, class Period>
  bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& timeout) {
    return acquire_until(true, detail::deadline_after(timeout));
  }
  template <class Clock, class Duration>
  bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    return acquire_until(true, detail::steady_deadline(deadline));
  }
  void unlock_shared() noexcept;
  Status unlock_shared_checked() noexcept;

  // The calling thread's hold, write or read. token() and stop_token()
  // throw not_owner if it holds neither.
  std::uint64_t token() const;
  bool lost() const noexcept;
  std::stop_token stop_token() const;
  bool held_by_current_thread() const noexcept;         // write
  bool held_shared_by_current_thread() const noexcept;  // read

  const std::string& name() const noexcept { return name_; }
  const MutexOptions& options() const noexcept { return options_; }

 private:
  friend class Client;
  SharedMutex(std::shared_ptr<detail::ClientState> client, std::string name, MutexOptions options);
  bool acquire_until(bool shared, std::chrono::steady_clock::time_point deadline);

  std::shared_ptr<detail::ClientState> client_;
  std::string name_;
  MutexOptions options_;
};

}  // namespace dlock
