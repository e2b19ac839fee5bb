// store.h — what the redis backend's drivers share: the connections, the
// subscriber, the key layout, and the waiter that watches for one event.
#pragma once

#include "backends/redis/config.h"
#include "backends/redis/pool.h"
#include "backends/redis/replies.h"
#include "backends/redis/subscriber.h"
#include "core/driver.h"

#include <hiredis.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace dlock::detail::redis {

// A watcher entry (a latch, barrier or election observer waiting for one
// event) lives this long unless refreshed: a thread re-reads at least every
// 500 ms but may wait on one entry for longer; a dead client's entry costs
// one message, and is dropped at the next watch.
inline constexpr std::chrono::milliseconds watcher_ttl{60'000};

struct Store {
  const Config& config;
  Commands& pool;
  Subscriber& subscriber;
  const std::string& client_id;
  const std::string& channel_prefix;

  // "<prefix>{<name>}:" — every key of the name starts with it.
  std::string base(std::string_view name) const { return config.prefix + "{" + std::string(name) + "}:"; }
  // A waiting slot's entry in the store: "<client id>/<slot key>/<nonce>".
  // The nonce tells this wait from an earlier one of the same thread: a
  // message meant for that one (late) is not taken for ours. Every wake-up
  // publishes the entry, so none of it is secret: a handover proves itself
  // with the wait's secret (Subscriber::Slot::secret), not with this.
  std::string entry(const Subscriber::Slot& slot) const { return client_id + "/" + slot.owner + "/" + slot.nonce; }
  // The channel this client's wake-ups for `name` come on, if sharded
  // (redis+cluster: channel_prefix is empty; the scripts' publish() builds
  // the same from the key): in the name's slot. Else "" (one channel).
  std::string channel(std::string_view name) const {
    return channel_prefix.empty() ? base(name) + "client:" + client_id : std::string();
  }
  // The slot key of the calling thread when it watches for an event.
  std::string watcher_key() const;
};

// A Waiter for one event (a latch reaching 0, a barrier opening, a new
// leader): its slot in the subscriber's table, taken out when it goes.
class EventWaiter final : public Waiter {
 public:
  EventWaiter(Subscriber& subscriber, std::shared_ptr<Subscriber::Slot> slot)
      : subscriber_(subscriber), slot_(std::move(slot)) {}
  ~EventWaiter() override { subscriber_.remove(slot_); }
  Status wait_until(steady::time_point until) override {
    subscriber_.wait(*slot_, until);
    return {};
  }

 private:
  Subscriber& subscriber_;
  std::shared_ptr<Subscriber::Slot> slot_;
};

// Registers the calling thread's watcher slot for `tag` (before the script
// that arms it runs, so a message right after is heard); the caller turns
// it into an EventWaiter or lets it go.
class WatchSlot {
 public:
  WatchSlot(const Store& store, bool watch, std::string_view name, std::string tag);
  ~WatchSlot();
  WatchSlot(const WatchSlot&) = delete;
  WatchSlot& operator=(const WatchSlot&) = delete;
  // The entry to pass to the script ("" if not watching).
  const std::string& entry() const noexcept { return entry_; }
  // The Waiter, if watching; the slot then stays registered.
  std::unique_ptr<Waiter> take();

 private:
  Subscriber& subscriber_;
  std::shared_ptr<Subscriber::Slot> slot_;
  std::string entry_;
};

inline Status unexpected(std::string_view step) {
  return Status(errc::internal, "redis backend: " + std::string(step) + ": unexpected reply from the script");
}

inline std::string ms(std::chrono::milliseconds d) { return std::to_string(d.count()); }

}  // namespace dlock::detail::redis
