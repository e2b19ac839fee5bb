// PostgreSQL under faults: a server restarted (a crash to its clients),
// stopped (SIGSTOP) and killed while locks are held. Each test starts its
// own server (scripts/postgres-server.sh) in a temp dir, because it breaks
// it. (The backend's behaviour without faults:
// tests/backends/postgres_test.cpp.)
#include "child_process.h"
#include "postgres_server.h"
#include "stopped_store.h"
#include "thrown.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <thread>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// (tests/backends/postgres_test.cpp runs the same server, but for
// unlock_does_not_wait_for_the_server(), as suite PostgresFault too: CTest's
// test names use it.)
class PostgresFault : public OwnPostgresServer {
 protected:
  // The body of the two UnlockDoesNotWaitForTheServer tests (below).
  void unlock_does_not_wait_for_the_server(const std::string& query);
};

TEST_F(PostgresFault, TokensKeepIncreasingAcrossARestart) {
  std::uint64_t before = 0;
  {
    auto client = connect(url());
    auto m = client->mutex("orders");
    for (int i = 0; i < 3; ++i) {
      std::lock_guard hold(m);
      before = m.token();
    }
  }
  ASSERT_TRUE(server("restart"));
  auto client = connect(url());
  auto m = client->mutex("orders");
  std::lock_guard hold(m);
  EXPECT_GT(m.token(), before) << "a token was issued again after the restart";
}

// The hold is a row: a server back within the lease has it, the holder's
// renewals (on new connections) keep it, and no one else gets the lock.
TEST_F(PostgresFault, HoldOutlivesAShortRestartThroughItsRow) {
  auto holder_client = connect(url(), {.op_timeout = 1s});
  auto holder = holder_client->mutex("jobs/nightly", {.lease = 6s});
  holder.lock();
  ASSERT_TRUE(server("restart"));
  std::this_thread::sleep_for(scaled(7s));  // past the lease: renewals after the restart kept it
  EXPECT_FALSE(holder.lost()) << "the holder lost a lock the restarted server still had for it";
  auto other = connect(url())->mutex("jobs/nightly");
  EXPECT_FALSE(other.try_lock()) << "another client took a lock whose holder kept renewing it";
  EXPECT_TRUE(holder.unlock_checked());
  EXPECT_TRUE(other.try_lock());
  other.unlock();
}

TEST_F(PostgresFault, StoppedServerFailsCallsWithinTheTimeoutAndHoldersLearnTheyLost) {
  auto client = connect(url(), {.op_timeout = 500ms});
  auto held = client->mutex("held", {.lease = 1500ms});
  held.lock();
  auto other = client->mutex("other");
  ASSERT_TRUE(server("pause"));
  const auto start = steady::now();
  EXPECT_EQ(thrown([&] { (void)other.try_lock(); }), errc::unavailable);
  EXPECT_LT(steady::now() - start, scaled(2s)) << "a call to a stopped server outlived op_timeout";
  EXPECT_TRUE(eventually([&] { return held.lost(); }, 3s)) << "the holder never learnt its lease ran out";
  ASSERT_TRUE(server("resume"));
  held.unlock();
  // The client recovers: fresh connections replace the ones that timed out.
  EXPECT_TRUE(eventually([&] {
    try {
      if (!other.try_lock()) return false;
      other.unlock();
      return true;
    } catch (const Error&) {
      return false;
    }
  }, 5s));
}

// unlock() sends the release and returns: a stopped server does not hold it
// up, while unlock_checked() waits for the answer and fails within
// op_timeout. The release runs once the server resumes (the server reads
// what the client wrote before it gave up on the connection). `query`: the
// url's, for the mode.
void PostgresFault::unlock_does_not_wait_for_the_server(const std::string& query) {
  auto client = connect(url(query), {.op_timeout = 1s});
  auto m = client->mutex("async"), checked = client->mutex("checked");
  m.lock();
  checked.lock();
  // (Session mode: the holding connection failed, so the server freed it: lock_lost.)
  expect_unlock_does_not_wait(
      m, checked, [&] { ASSERT_TRUE(server("pause")); }, [&] { ASSERT_TRUE(server("resume")); },
      query.empty() ? std::optional(errc::unavailable) : std::optional(errc::lock_lost));
  expect_the_release_ran(*client, *connect(url(query), {.op_timeout = 1s}));
}

TEST_F(PostgresFault, UnlockDoesNotWaitForTheServer) { unlock_does_not_wait_for_the_server(""); }
TEST_F(PostgresFault, SessionUnlockDoesNotWaitForTheServer) { unlock_does_not_wait_for_the_server("?mode=session"); }

// A release sent without waiting that fails on the server, inside its
// transaction (a trigger refuses it): the thread's next call, written behind
// it in the same pipeline, ran into that aborted transaction (SQLSTATE
// 25P02) and changed nothing, so it is sent again on a clean connection and
// succeeds; the failed release is counted, not thrown at the next caller.
TEST_F(PostgresFault, ACallPipelinedBehindAFailedReleaseIsSentAgain) {
  auto client = connect(url(), {.op_timeout = 2s});
  auto doomed = client->mutex("doomed"), next = client->mutex("next");
  doomed.lock();
  admin(
      "CREATE FUNCTION dlock_test_refuse() RETURNS trigger LANGUAGE plpgsql AS "
      "'BEGIN IF OLD.name = ''doomed'' THEN RAISE EXCEPTION ''release refused''; END IF; RETURN OLD; END'; "
      "CREATE TRIGGER dlock_test_refuse BEFORE DELETE ON dlock_holds FOR EACH ROW "
      "EXECUTE FUNCTION dlock_test_refuse()");
  doomed.unlock();  // refused by the server, answered later
  EXPECT_TRUE(next.try_lock()) << "the call behind the failed release did not run";
  EXPECT_TRUE(next.unlock_checked().ok());
  const auto stats = client->stats();
  EXPECT_EQ(stats.failed_releases, 1u);
  EXPECT_EQ(stats.releases, 1u);
  admin("DROP TRIGGER dlock_test_refuse ON dlock_holds");
  // The refused release freed nothing: "doomed" is held until its lease ends.
  auto other = connect(url());
  EXPECT_FALSE(other->mutex("doomed").try_lock()) << "the refused release freed the lock";
}

TEST_F(PostgresFault, KilledServerIsUnavailableNotAHang) {
  auto client = connect(url(), {.op_timeout = 500ms});
  auto m = client->mutex("m");
  ASSERT_TRUE(server("kill"));
  const auto start = steady::now();
  EXPECT_EQ(thrown([&] { m.lock(); }), errc::unavailable);
  EXPECT_EQ(thrown([&] { (void)connect(url(), {.op_timeout = 500ms}); }), errc::unavailable);
  EXPECT_LT(steady::now() - start, scaled(3s));
}

// Session mode: a restart ends every session and with them the locks; the
// holder learns it at its next renewal, never assumes it still holds.
TEST_F(PostgresFault, SessionHoldersLearnARestartFreedTheirLocks) {
  auto holder_client = connect(url("?mode=session"), {.op_timeout = 1s});
  auto holder = holder_client->mutex("jobs/report", {.lease = 1500ms});
  holder.lock();
  const auto before = holder.token();
  ASSERT_TRUE(server("restart"));
  EXPECT_TRUE(eventually([&] { return holder.lost(); }, 4s)) << "the holder kept believing in a lock the restart freed";
  auto other = connect(url("?mode=session"))->mutex("jobs/report");
  ASSERT_TRUE(other.try_lock());
  EXPECT_GT(other.token(), before);
  other.unlock();
  EXPECT_EQ(holder.unlock_checked().code(), errc::lock_lost);
}

}  // namespace
}  // namespace dlock::test
