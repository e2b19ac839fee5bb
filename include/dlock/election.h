// dlock/election.h — leader election among every process that uses the same store.
//
// Candidates campaign for a name; at most one of them leads at a time, and
// the others wait in the order they started campaigning. Leadership
// belongs to the thread that campaigned (as a Mutex hold does): is_leader(),
// resign(), token() and stop_token() answer for the calling thread.
//
// On zk:// it is Apache Curator's LeaderLatch: each candidate is an
// ephemeral sequential node <root>/<name>/_c_<uuid>-latch-<seq> whose data
// is its participant id; the lowest sequence leads, each other candidate
// watches only the node just before its own. A Java service using a
// LeaderLatch on the same path takes part in the same election. On
// redis:// the leader holds a leased lock whose hash keeps its id;
// candidates queue FIFO (the next in line is woken when the leader
// resigns) and observers are told by the next leader's takeover, so a
// handoff is seen as one change. A leader that dies is replaced after its
// lease (options.lease). On file:// it is the file <name>.elect: the leader
// holds it as a Mutex holds its lock (a killed leader is replaced at once),
// waiting candidates keep their place in line with tickets. Backends without elections refuse
// Client::election() with errc::unsupported.
//
// Losing leadership: when the leader's session is lost (per the zk://
// lost_on policy) or its node is deleted by someone else, is_leader() turns
// false, lost() true, and stop_token() is signalled, as for a Mutex whose
// lease is lost. Stop acting as leader then, resign(), and campaign again
// if you still want to lead. Both count as soon as the client sees them
// (the leader keeps a watch on its own node; the watchdog's check every
// 10 s is the safety net).
//
// Why a fencing token: two processes can both believe they lead for a
// moment (a leader paused past its session timeout wakes up before it
// learns it lost). Pass token() with every write the leader makes and have
// the resource refuse a token lower than the highest it has seen; the
// tokens of successive leaders strictly increase.
//
// Observing: leader() reads who leads now without campaigning;
// wait_leader_change_for/_until() block until that differs from what the
// caller last saw. Leaders are told apart by their ids, so give each
// participant a distinct one.
//
// Thread-safety: one Election object may be used from many threads; each
// thread campaigns, leads and resigns independently. Blocking calls:
// campaign() and its timed forms, and the wait_leader_change forms, wait;
// they, leader() and resign() make remote calls, each bounded by
// ClientOptions::op_timeout. is_leader(), lost(), token() and stop_token()
// are local.
//
// Example:
//   auto election = client->election("jobs/scheduler");
//   election.campaign("scheduler@" + hostname());
//   while (!election.stop_token().stop_requested()) schedule_once(election.token());
//   election.resign();
#pragma once

#include <dlock/hold.h>
#include <dlock/mutex.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

namespace dlock {

class Election {
 public:
  Election(Election&&) noexcept = default;
  Election& operator=(Election&&) noexcept = default;
  Election(const Election&) = delete;
  Election& operator=(const Election&) = delete;
  // Does not resign: leadership belongs to the thread, and ends with
  // resign() (or when the Client goes away).
  ~Election() = default;

  // Blocks until the calling thread leads. `id` is this participant's id,
  // what leader() reports to everyone while it leads (empty by default, as
  // Curator's). If the thread already leads, returns at once and keeps its
  // place and its first id. Throws Error: unavailable (store unreachable),
  // lock_lost (the thread led and lost it; resign() first).
  void campaign(std::string id = {});

  // Campaigns for at most `timeout` (negative counts as zero); true if the
  // calling thread leads. On false it has left the queue: no trace remains.
  template <class Rep, class Period>
  bool campaign_for(const std::chrono::duration<Rep, Period>& timeout, std::string id = {}) {
    return campaign_until_steady(detail::deadline_after(timeout), std::move(id));
  }

  // Campaigns until `deadline` on its own clock; true if the calling thread leads.
  template <class Clock, class Duration>
  bool campaign_until(const std::chrono::time_point<Clock, Duration>& deadline, std::string id = {}) {
    return campaign_until_steady(detail::steady_deadline(deadline), std::move(id));
  }

  // Asynchronous campaign, as Mutex::async_lock (see there and
  // dlock/hold.h): leadership belongs to the Hold it completes with, not
  // to a thread (is_leader(), resign() and token() of this object don't see
  // it; the Hold's do: unlock() resigns). A cancelled or timed-out campaign
  // leaves the queue.
  //   dlock::Hold leading = co_await election.async_campaign("me", asio::use_awaitable);
  std::future<Hold> async_campaign(std::string id = {}, std::stop_token stop = {}) {
    return Hold::future_of(starter(std::chrono::steady_clock::time_point::max(), std::move(id), std::move(stop)));
  }
  template <class Rep, class Period>
  std::future<Hold> async_campaign_for(const std::chrono::duration<Rep, Period>& timeout, std::string id = {},
                                       std::stop_token stop = {}) {
    return Hold::future_of(starter(detail::deadline_after(timeout), std::move(id), std::move(stop)));
  }
  void async_campaign(std::string id, AsyncCallback done, std::stop_token stop = {}) {
    starter(std::chrono::steady_clock::time_point::max(), std::move(id), std::move(stop))(std::move(done));
  }
  template <detail::completion_token Token>
  auto async_campaign(std::string id, Token&& token, std::stop_token stop = {}) {
    return detail::async_adapter<std::decay_t<Token>>::initiate(
        std::forward<Token>(token), starter(std::chrono::steady_clock::time_point::max(), std::move(id), std::move(stop)));
  }

  // Gives up leadership: the next candidate in line leads. Never throws; a
  // call from a thread that does not lead is counted and ignored.
  void resign() noexcept;

  // resign() that reports: not_owner if the calling thread does not lead,
  // lock_lost if it had already lost leadership, unavailable if the store
  // could not be told (the session's end then frees it).
  Status resign_checked() noexcept;

  // True if the calling thread leads and has not lost it.
  bool is_leader() const noexcept;

  // True if the calling thread led and lost it (see above); resign() then.
  bool lost() const noexcept;

  // Signalled when the calling thread loses leadership (never by resign()).
  // Throws not_owner if the calling thread does not lead.
  std::stop_token stop_token() const;

  // The fencing token of the calling thread's leadership. Throws not_owner
  // if it does not lead.
  std::uint64_t token() const;

  // The id of the current leader, as the store sees it now; nullopt if
  // nobody campaigns. One remote read; throws on store errors.
  std::optional<std::string> leader();

  // Blocks until leader() differs from `known` or `timeout` passes; returns
  // leader() as last read (equal to `known` on timeout).
  template <class Rep, class Period>
  std::optional<std::string> wait_leader_change_for(const std::optional<std::string>& known,
                                                    const std::chrono::duration<Rep, Period>& timeout) {
    return wait_leader_change_steady(known, detail::deadline_after(timeout));
  }
  template <class Clock, class Duration>
  std::optional<std::string> wait_leader_change_until(const std::optional<std::string>& known,
                                                      const std::chrono::time_point<Clock, Duration>& deadline) {
    return wait_leader_change_steady(known, detail::steady_deadline(deadline));
  }

  const std::string& name() const noexcept { return name_; }

 private:
  friend class Client;
  Election(std::shared_ptr<detail::ClientState> client, std::string name, MutexOptions options);
  bool campaign_until_steady(std::chrono::steady_clock::time_point deadline, std::string id);
  // As Mutex::starter, for a campaign with `id`.
  detail::AsyncStart starter(std::chrono::steady_clock::time_point deadline, std::string id,
                             std::stop_token stop) const;
  std::optional<std::string> wait_leader_change_steady(const std::optional<std::string>& known,
                                                       std::chrono::steady_clock::time_point deadline);

  std::shared_ptr<detail::ClientState> client_;
  std::string name_;
  MutexOptions options_;  // the leader's lease, on lease-based stores
};

}  // namespace dlock
