// postgres_server.h — a test fixture that runs a PostgreSQL server of its
// own for each test (scripts/postgres-server.sh, path in
// DLOCK_POSTGRES_SCRIPT, data in a temp dir): for the tests that restart,
// stop or kill it, or set it up (TLS, users) as no shared server may be.
// Header only: it needs gtest, which the tests link.
#pragma once

#include "child_process.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <utility>

namespace dlock::test {

// Runs `command`; its output (stdout and stderr) and whether it succeeded.
inline std::pair<bool, std::string> shell(const std::string& command) {
  std::string out;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return {false, ""};
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  return {::pclose(p) == 0, out};
}

class OwnPostgresServer : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server("start")) << "could not start PostgreSQL"; }
  void TearDown() override { (void)server("stop"); }

  bool server(const std::string& command) {
    auto [ok, out] = shell(env_ + " " + DLOCK_POSTGRES_SCRIPT + " " + command + " " + dir_.path() + "/pg");
    if (!ok) ADD_FAILURE() << command << ": " << out;
    return ok;
  }
  std::string read(const std::string& file) const {
    std::ifstream in(dir_.path() + "/pg/" + file);
    std::string line;
    std::getline(in, line);
    return line;
  }
  std::string url(const std::string& query = "") const { return read("url") + query; }
  // SQL as the superuser.
  void admin(const std::string& sql) {
    auto [ok, out] = shell("psql -q -v ON_ERROR_STOP=1 '" + read("admin_url") + "' -c \"" + sql + "\"");
    ASSERT_TRUE(ok) << sql << ": " << out;
  }

  TempDir dir_;
  std::string env_;  // settings for the script ("POSTGRES_TLS=DIR ...")
};

}  // namespace dlock::test
