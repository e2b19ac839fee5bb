// store.cpp — what the redis backend's drivers share (store.h).
#include "backends/redis/store.h"

#include "core/owner_id.h"

namespace dlock::detail::redis {

std::string Store::watcher_key() const { return "w" + std::to_string(thread_ordinal()); }

WatchSlot::WatchSlot(const Store& store, bool watch, std::string_view name, std::string tag)
    : subscriber_(store.subscriber) {
  if (!watch) return;
  const std::string key = store.watcher_key();
  slot_ = subscriber_.add(key, std::move(tag), store.channel(name));
  entry_ = store.entry(*slot_);
}

WatchSlot::~WatchSlot() {
  if (slot_) subscriber_.remove(slot_);
}

std::unique_ptr<Waiter> WatchSlot::take() {
  if (!slot_) return nullptr;
  return std::make_unique<EventWaiter>(subscriber_, std::move(slot_));
}

}  // namespace dlock::detail::redis
