// stopped_store.h — unlock() against a store that does not answer: it
// sends the release and returns, where unlock_checked() waits for the
// answer and gives up at op_timeout. For the fault tests of every store
// whose releases don't wait (header only: it needs gtest and dlock, which
// the tests link).
#pragma once

#include "child_process.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <optional>

namespace dlock::test {

// With `sent` and `checked` held by a client whose op_timeout is 1 s: stops
// the store (`stop`), unlocks `sent` and, checked, `checked`, resumes it
// (`resume`), and expects unlock() to have returned at once and
// unlock_checked() to have waited out op_timeout and failed (with
// `checked_code`, if given).
inline void expect_unlock_does_not_wait(dlock::Mutex& sent, dlock::Mutex& checked, const std::function<void()>& stop,
                                        const std::function<void()>& resume,
                                        std::optional<errc> checked_code = std::nullopt) {
  using steady = std::chrono::steady_clock;
  using namespace std::chrono_literals;
  stop();
  auto start = steady::now();
  sent.unlock();
  const auto unlock_took = steady::now() - start;
  start = steady::now();
  const Status outcome = checked.unlock_checked();
  const auto checked_took = steady::now() - start;
  resume();
  EXPECT_FALSE(outcome.ok()) << "unlock_checked() succeeded against a stopped store";
  if (checked_code) {
    EXPECT_EQ(outcome.code(), *checked_code) << outcome.message();
  }
  EXPECT_LT(unlock_took, scaled(200ms)) << "unlock() waited for a stopped server";
  EXPECT_GE(checked_took, 900ms) << "unlock_checked() did not wait for the answer";
}

// Then, with the store running again: `other` (another client) takes
// "async", so the release unlock() sent ran; and `client` has accounted for
// both releases once its next call has read what was unread. One whose
// connection unlock_checked() gave up on counts as failed, although the
// store ran it.
inline void expect_the_release_ran(dlock::Client& client, dlock::Client& other) {
  using namespace std::chrono_literals;
  auto taker = other.mutex("async");
  EXPECT_TRUE(taker.try_lock_for(scaled(3s))) << "the release sent by unlock() never ran";
  taker.unlock();
  (void)client.list_locks("async");
  const auto stats = client.stats();
  EXPECT_EQ(stats.releases + stats.failed_releases, 2u);
}

}  // namespace dlock::test
