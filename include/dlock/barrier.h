// dlock/barrier.h — a barrier for `parties` members in any processes that
// use the same store, with a second gate on the way out (a double barrier):
// members wait for each other to start a computation, and again to finish it.
//
// Client::barrier(name, parties) makes a handle; each handle is one member.
// arrive_and_wait() enters: it adds the member and blocks until `parties`
// members are in, then every member waiting goes on at once. leave() takes
// the member out and blocks until every member has left. A member that
// never calls leave() is left behind in the barrier: its entry goes when
// its handle is destroyed or its process dies (with its session), and
// leave() in the others waits for that.
//
// `parties` is a threshold, not a limit: the barrier opens when that many
// members are in, and a member that arrives after it opened goes through
// at once. Every member should pass the same `parties`; each one opens the
// barrier when it sees as many members as its own `parties` says.
//
// One round per name: a barrier stays open until its last member has left
// (only then can the name be entered again and wait). Rounds that overlap —
// a member of the next round arriving while the last one is still leaving
// — would pass through the open barrier, so give each round its own name
// (e.g. with a round number).
//
// Blocking: arrive_and_wait() and leave() block; their _for/_until forms
// return false at their deadline (negative timeouts are zero: one check).
// Each remote step is bounded by ClientOptions::op_timeout. Waiting costs
// no polling: the store notifies a waiter (plus a re-read at least every
// 500 ms as a safety net).
//
// Timeouts: an arrive_and_wait_for() that returns false takes the member
// out again (no entry is left behind; the handle can arrive again). It can
// race with the last arrival: if that one counted this member just before
// it went, the others go on although this one did not. A leave_for() that
// returns false has left (its entry is gone) but not seen every other
// member leave.
//
// Errors: Error with unavailable if the store did not answer within
// op_timeout or the connection dropped while the member waited; lock_lost
// if the member's entry vanished while it waited to enter (its session
// expired). Either way a call that failed has taken the member out (its
// entry is removed now, or as soon as the store answers): arrive again. Misuse is refused before any remote call and changes
// nothing: Client::barrier() with parties < 1 → invalid_argument;
// arrive_and_wait() on a handle that is already in (or while another call
// on it is under way) → invalid_argument; leave() on a handle that is not
// in → not_owner.
//
// Backends: zk://, in the layout of Apache Curator's DistributedDoubleBarrier,
// so Java members (new DistributedDoubleBarrier(client, "/<root>/<name>", N))
// and dlock members share one barrier:
//   <root>/<name>          a container
//   <root>/<name>/<uuid>   one ephemeral node per member that is in
//   <root>/<name>/ready    persistent; made by whoever sees `parties`
//                          members in, deleted when the last one has left
// redis:// (keys under the name's hash tag, see docs/backends.md): members
// are leased entries, renewed with the client's locks; the member that
// fills the barrier opens it and wakes every waiting member with one
// message each; the last live member out deletes the round.
// file:// (the file <name>.barrier: one entry per member in, alive while
// its process is; a killed member stops counting at once).
// Others refuse Client::barrier() with errc::unsupported. Names share one
// space with Mutex, Latch and Counter on zk://: give them different names.
//
// Thread-safety: a Barrier is one member: one call at a time (a second call
// while one blocks is refused). Handles of the same Client may be used from
// any number of threads, one handle per member.
//
// Example:
//   auto phase = client->barrier("reindex/2024-06-01", 4);  // 4 workers
//   phase.arrive_and_wait();                                 // all 4 are up
//   reindex_my_shard();
//   phase.leave();                                           // all 4 are done
#pragma once

#include <dlock/mutex.h>

#include <chrono>
#include <memory>
#include <string>

namespace dlock {

class Barrier {
 public:
  Barrier(Barrier&&) noexcept;
  // A member that is in leaves first (as the destructor does).
  Barrier& operator=(Barrier&&) noexcept;
  Barrier(const Barrier&) = delete;
  Barrier& operator=(const Barrier&) = delete;
  // A member that is in leaves without waiting for the others (its entry is
  // removed now, or as soon as the store answers). Never throws.
  ~Barrier();

  // Enters and blocks until `parties` members are in.
  void arrive_and_wait();
  // Enters and blocks until `parties` members are in (true) or `timeout`
  // has passed (false: this member is out again).
  template <class Rep, class Period>
  bool arrive_and_wait_for(const std::chrono::duration<Rep, Period>& timeout) {
    return enter_until_steady(detail::deadline_after(timeout));
  }
  // The same with a deadline on its own clock.
  template <class Clock, class Duration>
  bool arrive_and_wait_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    return enter_until_steady(detail::steady_deadline(deadline));
  }

  // Leaves and blocks until every member has left.
  void leave();
  // Leaves and blocks until every member has left (true) or `timeout` has
  // passed (false: this member has left, some others had not).
  template <class Rep, class Period>
  bool leave_for(const std::chrono::duration<Rep, Period>& timeout) {
    return leave_until_steady(detail::deadline_after(timeout));
  }
  // The same with a deadline on its own clock.
  template <class Clock, class Duration>
  bool leave_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    return leave_until_steady(detail::steady_deadline(deadline));
  }

  // Whether this member is in: arrive_and_wait() succeeded and leave() has
  // not been called since (local, no remote call).
  bool entered() const;
  int parties() const noexcept { return parties_; }
  const std::string& name() const noexcept { return name_; }

 private:
  friend class Client;
  struct Member;  // this handle's entry and where it is (barrier.cpp)
  Barrier(std::shared_ptr<detail::ClientState> client, std::string name, int parties, MutexOptions options);
  bool enter_until_steady(std::chrono::steady_clock::time_point deadline);
  bool leave_until_steady(std::chrono::steady_clock::time_point deadline);
  void abandon() noexcept;

  std::shared_ptr<detail::ClientState> client_;
  std::string name_;
  int parties_ = 0;
  MutexOptions options_;  // a member's lease, on stores that lease members
  std::unique_ptr<Member> member_;
};

}  // namespace dlock
