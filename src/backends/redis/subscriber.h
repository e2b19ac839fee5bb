// subscriber.h — the one subscriber connection of a client, its thread, and
// the table of this client's waiting threads it wakes.
//
// The connection is subscribed to one channel, "<prefix>client:<client id>":
// a release PUBLISHes there the waiter entry ("<client id>/<owner>") and
// the lock name of the one waiter it wakes, and the thread sets that
// waiter's flag. The thread blocks in poll() on the socket and an eventfd,
// so the destructor stops it at once (no read timeout loop); it PINGs an
// idle connection every second and reconnects (with backoff) when the server
// goes silent or away; after resubscribing it wakes every local waiter,
// since a message sent meanwhile is lost (they retry, and re-queue). With a
// Discovery (redis+sentinel) it follows the master: a connection made before
// the master changed is dropped within a second and made again.
//
// Sharded (redis+cluster, given SlotOwners): a release SPUBLISHes in its
// lock's slot, on "<prefix>{<name>}:client:<client id>" (scripts.h), which
// only the master serving that slot hears. The thread then keeps one
// connection per master and SSUBSCRIBEs there to the channel of each name
// a local thread waits on (counted: the first waiter subscribes, and add()
// returns once the master confirmed or op_timeout passed; the last one
// gone unsubscribes). A channel is subscribed again, on the master the map
// names then, when SSUBSCRIBE answers MOVED, when the server unsubscribes
// it (its slot moved away: the server pushes "sunsubscribe") and when the
// connection fails; its waiters are woken then, since a message sent
// meanwhile is lost. Each connection attempt to a master, and each reading
// of the slot map, runs on a short-lived thread of its own
// ("dlock-redis-con"), so a master that does not answer delays only the
// channels it serves, not the other masters' links or wake-ups.
#pragma once

#include "backends/redis/connection.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

namespace dlock::detail::redis {

// Which master serves a hash slot (redis+cluster's router), for a
// sharded subscriber.
class SlotOwners {
 public:
  virtual ~SlotOwners() = default;
  // The master serving `slot`; the map is read again first if `reread`.
  virtual std::optional<Endpoint> master_of(int slot, bool reread, steady::time_point deadline) = 0;
  // Has the map read again on a thread of its own (a failed master's
  // replica may serve its slots soon); one under way is enough.
  virtual void reread_later() = 0;
  // Node `asked` answered `error`, "MOVED <slot> <host>:<port>".
  virtual void redirected(std::string_view error, const Endpoint& asked) = 0;
  // The settings of a connection to node `at` (alive as long as the owner).
  virtual const Config& node_config(const Endpoint& at) = 0;
};

class Subscriber {
 public:
  // The lock as a release handed it over: token, the server's clock then
  // (ms), and the lease it was given (ms).
  struct Handover {
    std::uint64_t token = 0;
    std::int64_t server_ms = 0;
    std::int64_t lease_ms = 0;
    bool taken = false;
  };
  // One waiting thread (a Waiter) of this client.
  struct Slot {
    std::string owner;
    std::string name;
    std::string nonce;  // unique per slot of this subscriber (see Store::entry)
    // The wait's secret (a lock's waiter): 128 random bits that only this
    // client and the lock's keys know, until the one handover that carries
    // it. A handover is taken only with it, and only the first: a message
    // without it is a mere wake-up. Cleared ("" takes none) when the slot's
    // subscription was broken after it was given out (a handover sent
    // meanwhile is lost to us, and someone subscribed may have heard it).
    std::string secret;  // guarded by Subscriber's mutex
    std::string channel;  // sharded: the channel its wake-ups come on
    bool notified = false;  // guarded by Subscriber's mutex
    // Whether the store may have our entry in the lock's queue (a failed
    // attempt put it there): then leaving must take it out.
    bool queued = false;    // guarded by Subscriber's mutex
    // The last attempt that queued us: when it was sent (our clock) and the
    // server's clock when it ran (ms; -1 none yet). Guarded by the mutex.
    steady::time_point attempt_sent{};
    std::int64_t attempt_server_ms = -1;
    // A release handed the lock to us (its wake-up carried the token).
    std::optional<Handover> handover;  // guarded by Subscriber's mutex
    std::condition_variable cv;
    // Called (without the mutex) on each notification (Waiter::on_notify).
    std::function<void()> on_notify;   // guarded by Subscriber's mutex
    // Gives on a lock handed to this slot after it was removed (its waiter
    // gave up as the release ran): set by add(), called on the
    // subscriber's thread.
    std::function<void(const Handover&)> orphaned;
  };

  // What a message on the channel goes to, instead of the table of waiting
  // threads (the sentinel's +switch-master): its channel and payload.
  using MessageHook = std::function<void(std::string_view channel, std::string_view payload)>;

  // One channel on one server; or, with `owners`, sharded (`channel` unused).
  Subscriber(const Config& config, std::string channel, MessageHook on_message = {}, SlotOwners* owners = nullptr);
  ~Subscriber();  // stops and joins the thread
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  // Connects and subscribes (so a waiter registered after this is heard),
  // then starts the thread. (Sharded: starts the thread.)
  Status start(steady::time_point deadline);

  // `channel`: sharded, the channel its wake-ups come on (subscribed on
  // the master of its slot before this returns, unless that takes longer
  // than op_timeout); else unused. `orphaned`: see Slot.
  // `secret`: see Slot ("" for a slot that takes no handover).
  std::shared_ptr<Slot> add(const std::string& owner, const std::string& name, const std::string& channel = {},
                            std::function<void(const Handover&)> orphaned = {}, std::string secret = {});
  // The slot's secret now ("" none).
  std::string secret(const Slot& slot);
  // Removes the slot; whether its entry may still be queued in the store.
  // A slot with `orphaned` is remembered a while (a handover on its way).
  bool remove(const std::shared_ptr<Slot>& slot);
  // The slot of `owner` waiting for `name`, or nullptr.
  std::shared_ptr<Slot> find(const std::string& owner, const std::string& name);
  // After an attempt: whether it left us queued, and (queued) when it was
  // sent and the server's clock when it ran.
  void set_queued(Slot& slot, bool queued, steady::time_point sent = {}, std::int64_t server_ms = -1);
  // The handover to this slot if one came and was not taken yet; marks it taken.
  // With the slot's last attempt, for the validity.
  struct Taken {
    Handover handover;
    steady::time_point attempt_sent;
    std::int64_t attempt_server_ms;
  };
  std::optional<Taken> take_handover(Slot& slot);
  // A handover nobody took (the waiter left first); clears it.
  std::optional<Handover> untaken_handover(Slot& slot);
  // Until the slot is notified or `until`; clears the notification.
  void wait(Slot& slot, steady::time_point until);
  // From now on `notify` runs on each notification of the slot (at once if
  // one came already), on the subscriber's thread.
  void call_back(Slot& slot, std::function<void()> notify);

 private:
  // One connection: to the server (not sharded), or to one master.
  struct Link;
  // A sharded channel: how many slots wait on it, and where it is subscribed.
  struct Channel {
    int users = 0;
    std::string link;        // the link's address it was SSUBSCRIBEd on ("" none)
    bool confirmed = false;  // the master confirmed it
    bool leaving = false;    // SUNSUBSCRIBE sent
    bool lost = false;       // it was unsubscribed by a failure: wake its waiters once it is back
    bool awaiting_link = false;  // its master's link is being made
    steady::time_point retry_at{};
  };

  void run();
  Status subscribe(steady::time_point deadline);
  // Notifies `slot`; the callback to run once the mutex is let go, if any.
  std::function<void()> notify(Slot& slot);
  void dispatch(const redisReply* reply);
  void wake_all();
  // Wakes the slots waiting on `channel` (mu_ held); their callbacks.
  void wake_channel(const std::string& channel, std::vector<std::function<void()>>& calls);
  bool sleep_unless_stopped(std::chrono::milliseconds d);
  void kick();
  // Sharded, the thread's: (un)subscribes what add() and remove() asked for.
  void reconcile();
  // A reply on a sharded link (not a message); false if the link is out of step.
  bool on_reply(Link& link, const redisReply* reply);
  // The link failed: its channels are subscribed again elsewhere.
  void lose_link(const std::string& where, std::string_view why);
  // Sharded: connects `link` on a thread of its own, which kicks when done.
  void start_attempt(Link& link);
  // Sharded: joins the attempts that are done and acts on their outcome.
  void collect_attempts();

  const Config& config_;
  const std::string channel_;
  const MessageHook on_message_;
  SlotOwners* const owners_;  // sharded if not null
  std::map<std::string, std::unique_ptr<Link>> links_;  // the thread's (and start()'s) by address; "" unsharded
  bool reread_ = false;                                 // the thread's: the slot map is to be read again
  int stop_fd_ = -1;       // eventfd: written once to stop the thread
  int kick_fd_ = -1;       // eventfd: add()/remove() changed what to subscribe
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable confirmed_;                             // with mu_: a channel was confirmed
  std::unordered_map<std::string, std::shared_ptr<Slot>> slots_;  // by owner; guarded by mu_
  // Slots removed lately (by owner and nonce), oldest first; guarded by mu_.
  std::unordered_map<std::string, std::shared_ptr<Slot>> departed_;
  std::deque<std::pair<steady::time_point, std::string>> departed_order_;
  std::map<std::string, Channel> channels_;                       // sharded; guarded by mu_
  std::uint64_t next_nonce_ = 0;                                   // guarded by mu_
};

}  // namespace dlock::detail::redis
