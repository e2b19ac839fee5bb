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
#pragma once

#include "backends/redis/session.h"

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

namespace dlock::detail::redis {

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
  };

  // What a message on the channel goes to, instead of the table of waiting
  // threads (the sentinel's +switch-master): its channel and payload.
  using MessageHook = std::function<void(std::string_view channel, std::string_view payload)>;

  Subscriber(const Config& config, std::string channel, MessageHook on_message = {});
  ~Subscriber();  // stops and joins the thread
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  // Connects and subscribes (so a waiter registered after this is heard),
  // then starts the thread.
  Status start(steady::time_point deadline);

  std::shared_ptr<Slot> add(const std::string& owner, const std::string& name);
  // Removes the slot; whether its entry may still be queued in the store.
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
  void run();
  Status subscribe(steady::time_point deadline);
  // Notifies `slot`; the callback to run once the mutex is let go, if any.
  std::function<void()> notify(Slot& slot);
  void dispatch(const redisReply* reply);
  void wake_all();
  bool sleep_unless_stopped(std::chrono::milliseconds d);

  const Config& config_;
  const std::string channel_;
  const MessageHook on_message_;
  Connection connection_;  // used by the thread only (and start() before it)
  int stop_fd_ = -1;       // eventfd: written once to stop the thread
  std::thread thread_;
  std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<Slot>> slots_;  // by owner; guarded by mu_
  std::uint64_t next_nonce_ = 0;                                   // guarded by mu_
};

}  // namespace dlock::detail::redis
