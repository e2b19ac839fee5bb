// MultiLock: Mutexes taken in name order, released in reverse, none left
// held when the set as a whole was not had.
#include <dlock/multi_lock.h>

#include "core/lockable.h"
#include "core/owner_id.h"

#include <functional>
#include <map>
#include <mutex>

namespace dlock {

static_assert(detail::timed_lockable<MultiLock>);
static_assert(noexcept(std::declval<MultiLock&>().unlock()));

namespace detail {

// Per holding thread, one stop_source fired by any of its holds' stop tokens.
struct MultiLockStops {
  struct Entry {
    std::stop_source stop;
    std::vector<std::unique_ptr<std::stop_callback<std::function<void()>>>> forwards;
  };
  std::mutex mu;
  std::map<std::uint64_t, std::unique_ptr<Entry>> by_thread;  // thread_ordinal() -> entry
};

}  // namespace detail

MultiLock::MultiLock(std::vector<Mutex> locks, std::vector<std::string> names)
    : locks_(std::move(locks)), names_(std::move(names)), stops_(std::make_unique<detail::MultiLockStops>()) {}

MultiLock::MultiLock(MultiLock&&) noexcept = default;
MultiLock& MultiLock::operator=(MultiLock&&) noexcept = default;
MultiLock::~MultiLock() = default;

void MultiLock::lock() { (void)acquire_until(std::chrono::steady_clock::time_point::max()); }

bool MultiLock::try_lock() { return acquire_until(std::chrono::steady_clock::now()); }

bool MultiLock::acquire_until(std::chrono::steady_clock::time_point deadline) {
  std::size_t taken = 0;
  try {
    for (; taken < locks_.size(); ++taken) {
      if (!locks_[taken].try_lock_until(deadline)) {
        (void)unlock_first(taken);
        return false;
      }
    }
  } catch (...) {
    (void)unlock_first(taken);
    throw;
  }
  return true;
}

Status MultiLock::unlock_first(std::size_t n) noexcept {
  Status first;
  for (std::size_t i = n; i-- > 0;) {
    Status s = locks_[i].unlock_checked();
    if (!s && first.ok()) first = s;
  }
  if (!held_by_current_thread() && stops_) {
    // Destroyed outside the mutex: a forward running now (on the thread
    // that found a hold lost) may call back into this MultiLock.
    std::unique_ptr<detail::MultiLockStops::Entry> gone;
    {
      std::lock_guard lk(stops_->mu);
      auto it = stops_->by_thread.find(detail::thread_ordinal());
      if (it != stops_->by_thread.end()) {
        gone = std::move(it->second);
        stops_->by_thread.erase(it);
      }
    }
  }
  return first;
}

void MultiLock::unlock() noexcept { (void)unlock_first(locks_.size()); }

Status MultiLock::unlock_checked() noexcept { return unlock_first(locks_.size()); }

std::vector<std::uint64_t> MultiLock::tokens() const {
  std::vector<std::uint64_t> out;
  for (const auto& m : locks_) out.push_back(m.token());
  return out;
}

bool MultiLock::lost() const noexcept {
  for (const auto& m : locks_)
    if (m.lost()) return true;
  return false;
}

std::stop_token MultiLock::stop_token() const {
  std::vector<std::stop_token> holds;
  for (const auto& m : locks_) holds.push_back(m.stop_token());  // throws not_owner if one isn't held
  std::lock_guard lk(stops_->mu);
  auto& entry = stops_->by_thread[detail::thread_ordinal()];
  if (!entry) {
    entry = std::make_unique<detail::MultiLockStops::Entry>();
    for (const auto& hold : holds)
      entry->forwards.push_back(std::make_unique<std::stop_callback<std::function<void()>>>(
          hold, std::function<void()>([stop = entry->stop]() mutable { stop.request_stop(); })));
  }
  return entry->stop.get_token();
}

bool MultiLock::held_by_current_thread() const noexcept {
  for (const auto& m : locks_)
    if (!m.held_by_current_thread()) return false;
  return !locks_.empty();
}

}  // namespace dlock
