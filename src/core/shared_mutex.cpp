#include <dlock/shared_mutex.h>

#include "core/client_state.h"
#include "core/lockable.h"

#include <mutex>
#include <shared_mutex>

namespace dlock {
namespace {
using detail::LockKind;

static_assert(detail::shared_timed_lockable<SharedMutex>);
static_assert(noexcept(std::declval<SharedMutex&>().unlock_shared()));
}  // namespace

SharedMutex::SharedMutex(std::shared_ptr<detail::ClientState> client, std::string name, MutexOptions options)
    : client_(std::move(client)), name_(std::move(name)), options_(options) {}

bool SharedMutex::acquire_until(bool shared, std::chrono::steady_clock::time_point deadline) {
  return client_->acquire(name_, shared ? LockKind::read : LockKind::write, options_, deadline).value();
}

void SharedMutex::lock() { acquire_until(false, std::chrono::steady_clock::time_point::max()); }
bool SharedMutex::try_lock() { return acquire_until(false, std::chrono::steady_clock::now()); }
void SharedMutex::unlock() noexcept { (void)client_->release(name_, LockKind::write); }
Status SharedMutex::unlock_checked() noexcept { return client_->release(name_, LockKind::write); }

void SharedMutex::lock_shared() { acquire_until(true, std::chrono::steady_clock::time_point::max()); }
bool SharedMutex::try_lock_shared() { return acquire_until(true, std::chrono::steady_clock::now()); }
void SharedMutex::unlock_shared() noexcept { (void)client_->release(name_, LockKind::read); }
Status SharedMutex::unlock_shared_checked() noexcept { return client_->release(name_, LockKind::read); }

namespace {
// The calling thread's hold of a shared mutex: write if it has one, else read.
std::shared_ptr<detail::HeldLock> either(const detail::ClientState& client, const std::string& name) {
  auto hold = client.find(name, LockKind::write);
  return hold ? hold : client.find(name, LockKind::read);
}
}  // namespace

std::uint64_t SharedMutex::token() const {
  auto hold = either(*client_, name_);
  if (!hold) throw Error(errc::not_owner, "token of '" + name_ + "': the calling thread does not hold this lock");
  return hold->token;
}

bool SharedMutex::lost() const noexcept {
  try {
    auto hold = either(*client_, name_);
    return hold && hold->check_lost();
  } catch (...) {
    return false;
  }
}

std::stop_token SharedMutex::stop_token() const {
  auto hold = either(*client_, name_);
  if (!hold)
    throw Error(errc::not_owner, "stop_token of '" + name_ + "': the calling thread does not hold this lock");
  return hold->stop.get_token();
}

bool SharedMutex::held_by_current_thread() const noexcept {
  try {
    return client_->find(name_, LockKind::write) != nullptr;
  } catch (...) {
    return false;
  }
}

bool SharedMutex::held_shared_by_current_thread() const noexcept {
  try {
    return client_->find(name_, LockKind::read) != nullptr;
  } catch (...) {
    return false;
  }
}

}  // namespace dlock
