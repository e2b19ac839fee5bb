// wakeups.h — telling a queued waiter of another client that it may go.
//
// A waiter's queue entry carries its client's address; a release wakes the
// entries at the head of the queue only (one wake-up per handoff). How a
// wake-up travels is the database's: PostgreSQL's NOTIFY to the client's
// channel, a named pipe per client next to an SQLite file. Either way it
// arrives in the receiving client's Mailbox, which wakes the one thread
// that waits for that lock. A wake-up is a hint: a lost one costs the
// waiter its next periodic re-check, never safety.
#pragma once

#include "core/driver.h"

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

namespace dlock::detail::sql {

// What a wake-up names: the waiting owner and its lock. On the wire
// "owner\nkind\nname" (names have no control characters, owners and kinds
// no newline).
struct WakeTarget {
  std::string owner, kind, name;

  std::string encode() const { return owner + '\n' + kind + '\n' + name; }
  static std::optional<WakeTarget> decode(std::string_view text);
  auto operator<=>(const WakeTarget&) const = default;
};

// The waiting threads of one client, by what they wait for.
class Mailbox {
 public:
  struct Slot {
    std::mutex mu;
    std::condition_variable cv;
    bool woken = false;   // guarded by mu
    bool queued = false;   // guarded by mu: an attempt put its entry in the queue
    bool granted = false;  // guarded by mu: an attempt got the lock
    bool near_front = false;  // guarded by mu: the last attempt found at most one waiter before it

    // Queued again after a grant (one given back as stale): not granted.
    void set_queued(bool now, bool at_most_one_before = false) {
      std::lock_guard lk(mu);
      queued = now;
      if (now) granted = false;
      near_front = now && at_most_one_before;
    }
    void set_granted() {
      std::lock_guard lk(mu);
      queued = false;
      near_front = false;
      granted = true;
    }
    bool is_granted() {
      std::lock_guard lk(mu);
      return granted;
    }
    bool is_queued() {
      std::lock_guard lk(mu);
      return queued;
    }
    bool is_near_front() {
      std::lock_guard lk(mu);
      return near_front;
    }
  };

  std::shared_ptr<Slot> enter(const WakeTarget& target);
  void leave(const WakeTarget& target);
  // The slot of a waiting owner, or nullptr if it is not waiting.
  std::shared_ptr<Slot> find(const WakeTarget& target) const;
  // Wakes the thread waiting as `target`, if any.
  void deliver(const WakeTarget& target);
  // Wakes every waiting thread (a lost connection may have lost wake-ups).
  void deliver_all();

 private:
  mutable std::mutex mu_;
  std::map<WakeTarget, std::shared_ptr<Slot>> slots_;  // guarded by mu_
};

// How wake-ups leave this client and reach it. Implemented per database.
class Wakeups {
 public:
  virtual ~Wakeups() = default;
  // This client's address, stored with its queue entries. It may change
  // (MySQL's, when its connection is replaced), so it is read per entry.
  virtual std::string address() const = 0;
  // Wakes `target` at `address` (from a queue entry). Best-effort, quick.
  virtual void wake(std::string_view address, const WakeTarget& target) = 0;
};

}  // namespace dlock::detail::sql
