// dlock/error.h — the one list of errors, and the exception the std-shaped API throws.
//
// Every failure carries a dlock::errc. Its comment says what a caller should do.
// Calls shaped like the standard library (lock(), try_lock_for(), ...) throw
// dlock::Error, a std::system_error whose code() is in dlock::error_category().
// Calls named *_checked() return a dlock::Status instead of throwing.
#pragma once

#include <string>
#include <system_error>

namespace dlock {

enum class errc {
  // The caller passed something the library refuses (empty name, lease <= 0,
  // malformed URL, ...). The message names the argument. Nothing was changed.
  // Don't retry: fix the call.
  invalid_argument = 1,
  // The store could not be reached or did not answer within the configured
  // timeout. Retry the call later (with backoff).
  unavailable = 2,
  // The lock was not acquired before the deadline. Retry if you still want it.
  timeout = 3,
  // The lock was held but its lease or session is gone: another client may
  // hold it now. Stop the critical section and redo it from the start.
  lock_lost = 4,
  // The calling thread does not hold the lock it tried to release or use.
  // Don't retry: it is a bug in the caller.
  not_owner = 5,
  // A non-reentrant mutex was locked again by the thread that holds it.
  // Don't retry: it would wait for itself forever.
  would_deadlock = 6,
  // The backend cannot do this (operation or option not supported by it).
  // Don't retry.
  unsupported = 7,
  // The store answered something the library did not expect, or a bug.
  // Report it; retrying may or may not help.
  internal = 8,
  // An asynchronous acquisition was cancelled (its std::stop_token was
  // signalled) before it acquired: nothing is held and its place in the
  // store's queue is gone. Don't retry unless you still want it.
  cancelled = 9,
};

// The category of dlock::errc codes; its name() is "dlock".
const std::error_category& error_category() noexcept;

inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

// A short stable name for the code, e.g. "lock_lost".
const char* to_string(errc e) noexcept;

// What the std-shaped API throws. code() says what to do (see errc);
// what() says which argument or which step failed and why. Never contains
// credentials or owner tokens.
class Error : public std::system_error {
 public:
  Error(errc code, const std::string& message)
      : std::system_error(make_error_code(code), message) {}
  errc kind() const noexcept { return static_cast<errc>(code().value()); }
};

}  // namespace dlock

template <>
struct std::is_error_code_enum<dlock::errc> : std::true_type {};
