// tcp_proxy.h — a TCP relay on 127.0.0.1 between a client and a server, for
// network faults without root: black-hole the traffic (nothing passes,
// nothing is closed: what a partition looks like), cut every connection, or
// cut them at the moment a given reply passes (the request was applied, its
// reply is lost).
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dlock::test {

class TcpProxy {
 public:
  // Listens on a free port of 127.0.0.1 and relays to 127.0.0.1:target_port.
  explicit TcpProxy(int target_port);
  // Listens on a free port of `listen_ip` (an IPv4 address of this host, e.g.
  // a veth's end that a client in a network namespace reaches) and relays
  // to 127.0.0.1:target_port.
  TcpProxy(int target_port, const std::string& listen_ip);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  int port() const { return port_; }
  // true: bytes are neither read nor forwarded in either direction, and new
  // connections are accepted but left silent. false: relay again.
  void black_hole(bool on);
  // Closes every relayed connection (both sides see the close).
  void cut();
  // Once: the first bytes from the server that contain `marker` (a ZooKeeper
  // create's reply names the node it made) are not relayed; every
  // connection is cut instead, and if `then_black_hole`, black_hole(true)
  // follows at once (the client can't reconnect until black_hole(false)).
  // (A reply split across two reads of the socket may go through; on
  // loopback a small one comes in one piece.)
  void cut_at_reply(std::string marker, bool then_black_hole = false);
  // The reply cut_at_reply() kept from the client; empty until it fired.
  std::string dropped_reply();

 private:
  void run();
  struct Pair {
    int client = -1, server = -1;
  };
  int listener_ = -1;
  int port_ = 0;
  int target_port_;
  int wake_[2] = {-1, -1};
  std::mutex mu_;
  std::vector<Pair> pairs_;  // guarded by mu_
  bool cut_ = false;          // guarded by mu_
  std::string reply_marker_;  // guarded by mu_; empty: none armed
  bool black_hole_after_ = false;  // guarded by mu_
  std::string dropped_;       // guarded by mu_
  std::atomic<bool> black_hole_{false};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace dlock::test
