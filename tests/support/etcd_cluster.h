// etcd_cluster.h — an etcd of a test's own (scripts/etcd-server.sh, path in
// DLOCK_ETCD_SCRIPT, data in a temp dir) of one or more members: for the
// tests that stop, kill or cut off a member, or serve it with their own
// certificates or users.
#pragma once

#include "child_process.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace dlock::test {

// Runs `command` (/bin/sh); its exit status.
inline int run(const std::string& command) { return std::system(command.c_str()); }

// A throw-away etcd of `members` members, stopped when the test ends.
// `env`: settings for scripts/etcd-server.sh ("ETCD_TLS=DIR ...").
class Etcd {
 public:
  Etcd(const TempDir& dir, int members, const std::string& env = "") : dir_(dir.path() + "/etcd"), members_(members) {
    ok_ = run(env + " " + script() + " start " + dir_ + " " + std::to_string(members) + " >/dev/null") == 0;
  }
  // SIGKILL first: its data is thrown away, and a SIGTERM'd member takes
  // over a second to go.
  ~Etcd() {
    for (int i = 1; i <= members_; ++i) (void)run(script() + " kill " + dir_ + " " + std::to_string(i) + " >/dev/null 2>&1");
    (void)run(script() + " stop " + dir_ + " >/dev/null 2>&1");
  }
  bool ok() const { return ok_; }
  std::string url() const {
    std::ifstream in(dir_ + "/url");
    std::string url;
    in >> url;
    return url;
  }
  // "127.0.0.1:PORT[,...]", for a URL of the test's own.
  std::string endpoints() const {
    std::ifstream in(dir_ + "/endpoints");
    std::string endpoints;
    in >> endpoints;
    return endpoints;
  }
  int client_port(int member = 1) const {
    std::ifstream in(dir_ + "/node" + std::to_string(member) + "/ports");
    int client = 0;
    in >> client;
    return client;
  }
  bool act(const std::string& what, int member = 1) {
    return run(script() + " " + what + " " + dir_ + " " + std::to_string(member) + " >/dev/null") == 0;
  }
  int leader() {
    std::string out;
    if (FILE* p = ::popen((script() + " leader " + dir_).c_str(), "r")) {
      char buf[64];
      while (std::fgets(buf, sizeof buf, p)) out += buf;
      ::pclose(p);
    }
    return out.empty() ? 0 : std::stoi(out);
  }

 private:
  static std::string script() { return DLOCK_ETCD_SCRIPT; }
  std::string dir_;
  int members_;
  bool ok_ = false;
};

}  // namespace dlock::test
