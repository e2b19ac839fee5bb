// servers.h — finding the servers the CTest fixtures started.
#pragma once

#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>

namespace dlock::test {

// The URL of a server a CTest fixture started (DLOCK_TEST_SERVERS/<name>/url).
// Throws if it is missing: a test that needs a server fails without one.
inline std::string server_url(const std::string& name) {
  const char* root = std::getenv("DLOCK_TEST_SERVERS");
  if (!root) throw std::runtime_error("DLOCK_TEST_SERVERS is not set: run the tests with ctest (it starts the servers)");
  std::ifstream in(std::string(root) + "/" + name + "/url");
  std::string url;
  if (!(in >> url)) throw std::runtime_error("no " + name + " server: " + std::string(root) + "/" + name + "/url missing");
  return url;
}

// A name of its own for each test, from its temp dir's unique name.
inline std::string unique_name(const std::string& dir) { return "t-" + dir.substr(dir.find_last_of('/') + 1); }

// A key prefix of its own for each test.
inline std::string unique_prefix(const std::string& dir) { return unique_name(dir) + ":"; }

// unique_name(dir) as an SQL identifier: lower case, '_' for the rest.
inline std::string sql_identifier(const std::string& dir) {
  std::string id = unique_name(dir);
  for (char& c : id) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) c = '_';
  }
  return id.substr(0, 63);
}

}  // namespace dlock::test
