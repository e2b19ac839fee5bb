// thrown.h — which dlock error a call threw, for tests of bad input.
#pragma once

#include <dlock/error.h>

#include <gtest/gtest.h>

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

}  // namespace dlock::test
