// thrown.h — which dlock error a call threw, for tests of bad input.
#pragma once

#include <dlock/error.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace dlock::test {

// Runs `call` and returns the errc it threw (a test failure if it threw none).
template <class F>
errc thrown(F call) {
  try {
    call();
  } catch (const Error& e) {
    return e.kind();
  }
  ADD_FAILURE() << "no error thrown";
  return errc{};
}

// Expects `call` to throw `kind` with a message that names `named`
// (`what` says which call, in the failure).
template <class F>
void expect_thrown_naming(F call, errc kind, const std::string& named, const std::string& what) {
  try {
    call();
    ADD_FAILURE() << what << ": no error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << what << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << what << ": " << e.what();
  }
}

// Expects `call` to throw `kind` within `bound`, with a message that names
// `named` and never shows `secret` (a password; empty: none to look for).
// `what` names the case in failures.
template <class F>
void expect_refused_within(F call, errc kind, std::chrono::steady_clock::duration bound, const std::string& named,
                           const std::string& secret, const std::string& what) {
  const auto start = std::chrono::steady_clock::now();
  try {
    call();
    ADD_FAILURE() << what << ": no error thrown";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(e.kind(), kind) << what << ": " << message;
    EXPECT_NE(message.find(named), std::string::npos) << what << ": " << message;
    if (!secret.empty()) {
      EXPECT_EQ(message.find(secret), std::string::npos) << what << ": shows the password: " << message;
    }
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, bound) << what << ": not within the time bound";
}

}  // namespace dlock::test
