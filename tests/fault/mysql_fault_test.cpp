// MySQL/MariaDB under faults: a stopped (SIGSTOP) server, a killed one, one
// restarted. Each test starts its own MariaDB server
// (scripts/mariadb-server.sh) in a temp dir, because it stops, kills or
// restarts it. (The backend's behaviour without faults:
// tests/backends/mysql_test.cpp.)
#include "child_process.h"
#include "mariadb_server.h"
#include "stopped_store.h"
#include "thrown.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// (tests/backends/mysql_test.cpp runs the same server, but for
// unlock_does_not_wait_for_the_server(), as suite MysqlFault too: CTest's
// test names use it.)
class MysqlFault : public OwnMariadbServer {
 protected:
  // The body of the two UnlockDoesNotWaitForTheServer tests (below).
  void unlock_does_not_wait_for_the_server(const std::string& query);
};

// A stopped server answers nothing: every call fails with unavailable
// within op_timeout (never a hang), and the client works again once the
// server resumes.
TEST_F(MysqlFault, StoppedServerFailsCallsWithinTheTimeout) {
  auto client = connect(url_, options());
  auto held = client->mutex("held");
  held.lock();
  ASSERT_EQ(server("pause"), 0);
  auto other = client->mutex("other");
  const auto start = steady::now();
  EXPECT_EQ(thrown([&] { (void)other.try_lock(); }), errc::unavailable);
  const auto took = steady::now() - start;
  EXPECT_LT(took, 1000ms + scaled(700ms)) << "a call outlived op_timeout";
  ASSERT_EQ(server("resume"), 0);
  ASSERT_TRUE(other.try_lock_for(scaled(5s))) << "the client did not recover after the server resumed";
  other.unlock();
  held.unlock();
}

// unlock() sends the release and returns: a stopped server does not hold it
// up, while unlock_checked() waits for the answer and fails within
// op_timeout. The release runs once the server resumes (the server reads
// what the client wrote before it gave up on the connection). `query`: the
// url's, for the mode.
void MysqlFault::unlock_does_not_wait_for_the_server(const std::string& query) {
  auto client = connect(url_ + query, options());
  auto m = client->mutex("async"), checked = client->mutex("checked");
  m.lock();
  checked.lock();
  // (Session mode: the holding connection failed, so the server freed it: lock_lost.)
  expect_unlock_does_not_wait(
      m, checked, [&] { ASSERT_EQ(server("pause"), 0); }, [&] { ASSERT_EQ(server("resume"), 0); },
      query.empty() ? std::optional(errc::unavailable) : std::optional(errc::lock_lost));
  expect_the_release_ran(*client, *connect(url_ + query, options()));
}

TEST_F(MysqlFault, UnlockDoesNotWaitForTheServer) { unlock_does_not_wait_for_the_server(""); }
TEST_F(MysqlFault, SessionUnlockDoesNotWaitForTheServer) { unlock_does_not_wait_for_the_server("?mode=session"); }

// A killed server refuses connections: unavailable at once.
TEST_F(MysqlFault, KilledServerIsUnavailable) {
  auto client = connect(url_, options());
  auto m = client->mutex("m");
  ASSERT_TRUE(m.try_lock());
  m.unlock();
  ASSERT_EQ(server("kill"), 0);
  const auto start = steady::now();
  EXPECT_EQ(thrown([&] { (void)m.try_lock(); }), errc::unavailable);
  EXPECT_LT(steady::now() - start, 1000ms + scaled(700ms));
}

// Tokens come from a durable counter: after a restart (a crash to the
// clients), a new grant's token is still greater than every earlier one.
TEST_F(MysqlFault, TokensKeepIncreasingAcrossARestart) {
  std::uint64_t before = 0;
  {
    auto client = connect(url_, options());
    for (int i = 0; i < 5; ++i) {
      auto m = client->mutex("fenced");
      m.lock();
      before = m.token();
      m.unlock();
    }
  }
  ASSERT_EQ(server("restart"), 0);
  auto client = connect(url_, options());
  auto m = client->mutex("fenced");
  ASSERT_TRUE(m.try_lock_for(scaled(5s)));
  EXPECT_GT(m.token(), before);
  m.unlock();
}

// Session mode: a restart ends every session and with them the GET_LOCKs;
// the holder learns it at its next renewal, never assumes it still holds,
// and the next holder's token is greater.
TEST_F(MysqlFault, SessionHoldersLearnARestartFreedTheirLocks) {
  auto holder_client = connect(url_ + "?mode=session", options());
  auto holder = holder_client->mutex("jobs/report", {.lease = 1500ms});
  holder.lock();
  const auto before = holder.token();
  ASSERT_EQ(server("restart"), 0);
  EXPECT_TRUE(eventually([&] { return holder.lost(); }, 4s)) << "the holder kept believing in a lock the restart freed";
  auto other = connect(url_ + "?mode=session", options())->mutex("jobs/report");
  ASSERT_TRUE(other.try_lock_for(scaled(5s)));
  EXPECT_GT(other.token(), before);
  other.unlock();
  EXPECT_EQ(holder.unlock_checked().code(), errc::lock_lost);
}

}  // namespace
}  // namespace dlock::test
