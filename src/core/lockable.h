// lockable.h — the standard lock requirements the public types must model,
// so std::unique_lock, std::scoped_lock and std::shared_lock accept them.
#pragma once

#include <chrono>
#include <concepts>

namespace dlock::detail {

template <class M>
concept timed_lockable = requires(M m, std::chrono::milliseconds d, std::chrono::steady_clock::time_point t) {
  m.lock();
  { m.try_lock() } -> std::same_as<bool>;
  m.unlock();
  { m.try_lock_for(d) } -> std::same_as<bool>;
  { m.try_lock_until(t) } -> std::same_as<bool>;
};

template <class M>
concept shared_timed_lockable =
    timed_lockable<M> && requires(M m, std::chrono::milliseconds d, std::chrono::steady_clock::time_point t) {
      m.lock_shared();
      { m.try_lock_shared() } -> std::same_as<bool>;
      m.unlock_shared();
      { m.try_lock_shared_for(d) } -> std::same_as<bool>;
      { m.try_lock_shared_until(t) } -> std::same_as<bool>;
    };

}  // namespace dlock::detail
