// zookeeper_ensemble.h — ZooKeeper servers for fault tests, as this
// process's children (java in the foreground, killed with the test by
// PDEATHSIG), each with its own zoo.cfg and data dir under a temp dir.
//
// tickTime is 500 ms, so sessions from 1 s to 10 s are allowed.
#pragma once

#include "child_process.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace dlock::test {

class ZooKeeperEnsemble {
 public:
  // Starts `nodes` servers (1: standalone) and waits until each serves.
  ZooKeeperEnsemble(const std::string& dir, int nodes);
  ~ZooKeeperEnsemble();

  int size() const { return static_cast<int>(nodes_.size()); }
  // zk://127.0.0.1:P1,127.0.0.1:P2,... (every node).
  std::string url() const;
  int client_port(int node) const { return nodes_[node].client_port; }
  // The answer to a four-letter word ("srvr", "cons"), or "" if none.
  std::string ask(int node, const std::string& word) const;
  // "standalone", "leader", "follower", or "" if not serving.
  std::string mode(int node) const;
  // The index of the leader, or -1.
  int leader() const;
  // Until every running node serves (and, with several, one leads).
  bool wait_serving(std::chrono::milliseconds limit) const;

  void kill(int node);    // SIGKILL
  void start(int node);   // again, on the same ports and data
  bool running(int node) const { return nodes_[node].process != nullptr; }
  pid_t pid(int node) const;

 private:
  struct Node {
    std::string dir;
    int client_port = 0, quorum_port = 0, election_port = 0;
    std::unique_ptr<ChildProcess> process;
  };
  void write_config(int node) const;
  std::vector<Node> nodes_;
};

}  // namespace dlock::test
