// dlock/status.h — the non-throwing channel: Status and Result<T>.
//
// Internally every fallible step returns Result<T>; the std-shaped public
// calls turn a failed Result into a thrown dlock::Error. Callers who prefer
// not to handle exceptions use the *_checked() forms, which return these.
#pragma once

#include <dlock/error.h>

#include <string>
#include <utility>
#include <variant>

namespace dlock {

// Success, or an error code with a message naming what failed.
class [[nodiscard]] Status {
 public:
  Status() = default;  // success
  Status(errc code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const noexcept { return code_ == errc{}; }
  explicit operator bool() const noexcept { return ok(); }
  errc code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }

  // Throws dlock::Error if this is an error; does nothing on success.
  void throw_if_error() const {
    if (!ok()) throw Error(code_, message_);
  }

 private:
  errc code_{};
  std::string message_;
};

// A value or the Status that explains why there is none.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status error) : v_(std::move(error)) {}  // NOLINT: must not be ok()
  Result(errc code, std::string message) : v_(Status(code, std::move(message))) {}

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  // The error; a default (ok) Status if this holds a value.
  Status status() const { return ok() ? Status{} : std::get<1>(v_); }
  errc code() const noexcept { return ok() ? errc{} : std::get<1>(v_).code(); }

  // The value; throws dlock::Error if this holds an error.
  T& value() & {
    if (!ok()) std::get<1>(v_).throw_if_error();
    return std::get<0>(v_);
  }
  T&& value() && {
    if (!ok()) std::get<1>(v_).throw_if_error();
    return std::get<0>(std::move(v_));
  }
  T& operator*() & { return std::get<0>(v_); }
  T* operator->() { return &std::get<0>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace dlock
