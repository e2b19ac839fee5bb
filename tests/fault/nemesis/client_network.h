// client_network.h — a network namespace of the test's own for one client,
// joined to this host by a veth pair, that can be cut off from the host (a
// real partition: the kernel drops the packets, nothing is closed).
//
//   host  veth "dlh<pid>x<i>"  100.64.x.1/30  ──  100.64.x.2/30  veth in netns "dlock-nm-<pid>-<i>"
//
// The servers listen on 127.0.0.1 only, so the host side runs a TcpProxy on
// the host address (relaying to the server's port); the client in the
// namespace reaches the store through it. cut() adds iptables DROP rules for
// every packet in and out *inside the namespace* (the host's own firewall
// is never touched); heal() removes them. degrade() makes the link lossy
// and slow instead: a random share of the packets dropped each way
// (iptables' statistic match) and the client's outgoing traffic shaped to
// a low rate (a tbf queue: each packet waits its turn), which with TCP's
// retransmissions is added latency and loss (this kernel has no netem);
// restore() undoes it. The destructor deletes the
// namespace, its veth pair and so its rules, also when a test fails.
// Names carry the test's PID, so parallel tests never collide.
#pragma once

#include <string>

namespace dlock::test {

class ClientNetwork {
 public:
  // Why a namespace cannot be made here ("" if it can): not root, no `ip`
  // or `iptables`, or a kernel that refuses. Probed once per process.
  static std::string unavailable_reason();
  // The same for degrade(): the statistic match and the tbf queue.
  static std::string degrade_unavailable_reason();

  // Makes namespace `index` (0..7) of this process. Throws if it can't.
  explicit ClientNetwork(int index);
  ~ClientNetwork();
  ClientNetwork(const ClientNetwork&) = delete;
  ClientNetwork& operator=(const ClientNetwork&) = delete;

  const std::string& name() const { return name_; }        // for /var/run/netns/<name>
  const std::string& host_ip() const { return host_ip_; }  // the host's end, reachable from inside
  bool cut();
  bool heal();
  // Drops `loss_percent` % of the packets each way at random and shapes the
  // client's outgoing traffic to `rate_kbit`.
  bool degrade(int loss_percent, int rate_kbit);
  bool restore();

 private:
  std::string name_, host_if_, inner_if_, host_ip_, inner_ip_;
  bool cut_ = false;
  int loss_percent_ = 0;  // > 0 while degraded
};

}  // namespace dlock::test
