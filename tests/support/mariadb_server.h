// mariadb_server.h — a test fixture that runs a MariaDB server of its own
// for each test (scripts/mariadb-server.sh, path in DLOCK_MARIADB_SCRIPT,
// data in a temp dir): for the tests that stop, kill or restart it, or set
// it up (TLS, users) as no shared server may be. Header only: it needs
// gtest and dlock, which the tests link.
#pragma once

#include "child_process.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>

namespace dlock::test {

class OwnMariadbServer : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(server("start"), 0) << "could not start MariaDB";
    std::ifstream in(dir_.path() + "/url");
    ASSERT_TRUE(in >> url_);
  }
  void TearDown() override { (void)server("stop"); }

  int server(const std::string& command) {
    const std::string line = env_ + " " + DLOCK_MARIADB_SCRIPT + " " + command + " " + dir_.path() + " >/dev/null";
    return std::system(line.c_str());
  }

  ClientOptions options() const { return {.op_timeout = std::chrono::milliseconds(1000)}; }

  // Runs SQL as the server's root user (over its socket); the exit code.
  int admin(const std::string& sql) {
    std::ifstream in(dir_.path() + "/datadir");
    std::string data;
    in >> data;
    const std::string sql_file = dir_.path() + "/admin.sql";
    std::ofstream(sql_file) << sql;
    const std::string line =
        "mariadb --no-defaults -uroot --socket=" + data + "/sock < " + sql_file + " >/dev/null";
    return std::system(line.c_str());
  }

  // The URL with another user and database.
  std::string url_as(const std::string& user_and_password, const std::string& database) const {
    const auto at = url_.find('@'), slash = url_.rfind('/');
    return "mysql://" + user_and_password + url_.substr(at, slash - at) + "/" + database;
  }

  TempDir dir_;
  std::string url_;
  std::string env_;  // settings for the script ("MARIADB_TLS=DIR ...")
};

}  // namespace dlock::test
