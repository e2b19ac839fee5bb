#include <dlock/mutex.h>

#include "core/client_state.h"
#include "core/lockable.h"

#include <mutex>
#include <shared_mutex>

namespace dlock {

static_assert(std::is_move_constructible_v<Mutex>);
static_assert(detail::timed_lockable<Mutex>);
static_assert(noexcept(std::declval<Mutex&>().unlock()));

Mutex::Mutex(std::shared_ptr<detail::ClientState> client, std::string name, MutexOptions options)
    : client_(std::move(client)), name_(std::move(name)), options_(options) {}

void Mutex::lock() { acquire_until(std::chrono::steady_clock::time_point::max()); }

bool Mutex::try_lock() { return acquire_until(std::chrono::steady_clock::now()); }

bool Mutex::acquire_until(std::chrono::steady_clock::time_point deadline) {
  return client_->acquire(name_, detail::LockKind::mutex, options_, deadline).value();
}

void Mutex::unlock() noexcept { (void)client_->release(name_, detail::LockKind::mutex, false); }

Status Mutex::unlock_checked() noexcept { return client_->release(name_, detail::LockKind::mutex); }

std::uint64_t Mutex::token() const {
  auto hold = client_->find(name_, detail::LockKind::mutex);
  if (!hold) throw Error(errc::not_owner, "token of '" + name_ + "': the calling thread does not hold this lock");
  return hold->token;
}

bool Mutex::lost() const noexcept {
  try {
    auto hold = client_->find(name_, detail::LockKind::mutex);
    return hold && hold->check_lost();
  } catch (...) {
    return false;
  }
}

std::stop_token Mutex::stop_token() const {
  auto hold = client_->find(name_, detail::LockKind::mutex);
  if (!hold)
    throw Error(errc::not_owner, "stop_token of '" + name_ + "': the calling thread does not hold this lock");
  return hold->stop.get_token();
}

bool Mutex::held_by_current_thread() const noexcept { return hold_count() > 0; }

std::size_t Mutex::hold_count() const noexcept {
  try {
    auto hold = client_->find(name_, detail::LockKind::mutex);
    return hold ? hold->count : 0;
  } catch (...) {
    return 0;
  }
}

detail::AsyncStart Mutex::starter(std::chrono::steady_clock::time_point deadline, std::stop_token stop) const {
  return [client = client_, name = name_, options = options_, deadline, stop](AsyncCallback done) {
    client->acquire_async(detail::lock_request(name, detail::LockKind::mutex, options), options, deadline, stop,
                          std::move(done));
  };
}

void Mutex::force_unlock() { client_->force_release(name_).throw_if_error(); }

}  // namespace dlock
