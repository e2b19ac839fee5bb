// MySQL/MariaDB under faults: a stopped (SIGSTOP) server, a killed one, and
// one restarted while a lock is held. Each test starts its own MariaDB
// server (scripts/mariadb-server.sh) in a temp dir, because it stops or
// kills it.
#include "child_process.h"
#include "thrown.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

class MysqlFault : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(server("start"), 0) << "could not start MariaDB";
    std::ifstream in(dir_.path() + "/url");
    ASSERT_TRUE(in >> url_);
  }
  void TearDown() override { (void)server("stop"); }

  int server(const std::string& command) {
    const std::string line = std::string(DLOCK_MARIADB_SCRIPT) + " " + command + " " + dir_.path() + " >/dev/null";
    return std::system(line.c_str());
  }

  ClientOptions options() const { return {.op_timeout = 1000ms}; }

  TempDir dir_;
  std::string url_;
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

}  // namespace
}  // namespace dlock::test
