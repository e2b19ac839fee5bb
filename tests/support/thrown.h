// thrown.h — which dlock error a call threw, for tests of bad input.
#pragma once

#include <dlock/error.h>

#include <gtest/gtest.h>

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

}  // namespace dlock::test
