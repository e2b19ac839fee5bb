#include "client_network.h"

#include <unistd.h>

#include <cstdlib>
#include <stdexcept>

namespace dlock::test {
namespace {

bool run(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()) == 0; }

// 100.64.0.0/10 (shared address space, not routed on this host), one /30
// per (pid, index).
std::string address(int index, int host_part) {
  const unsigned subnet = (static_cast<unsigned>(::getpid()) * 8u + static_cast<unsigned>(index)) % (1u << 20);
  const unsigned a = (100u << 24) | (64u << 16) | (subnet << 2) | static_cast<unsigned>(host_part);
  return std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 255) + "." + std::to_string((a >> 8) & 255) +
         "." + std::to_string(a & 255);
}

}  // namespace

std::string ClientNetwork::unavailable_reason() {
  static const std::string reason = []() -> std::string {
    if (::geteuid() != 0) return "network partitions need root (network namespaces and iptables)";
    if (!run("command -v ip") || !run("command -v iptables"))
      return "network partitions need `ip` (iproute2) and `iptables` (scripts/install-deps.sh installs them)";
    try {
      ClientNetwork probe(7);
      if (!probe.cut() || !probe.heal()) return "the kernel refused iptables rules in a network namespace";
    } catch (const std::exception& e) {
      return std::string("the kernel refused a network namespace with a veth pair: ") + e.what();
    }
    return "";
  }();
  return reason;
}

std::string ClientNetwork::degrade_unavailable_reason() {
  static const std::string reason = []() -> std::string {
    if (auto why = unavailable_reason(); !why.empty()) return why;
    if (!run("command -v tc")) return "a lossy network needs `tc` (iproute2; scripts/install-deps.sh installs it)";
    try {
      ClientNetwork probe(6);
      if (!probe.degrade(10, 256) || !probe.restore())
        return "the kernel refused iptables' statistic match or a tbf queue in a network namespace";
    } catch (const std::exception& e) {
      return std::string("the kernel refused a network namespace with a veth pair: ") + e.what();
    }
    return "";
  }();
  return reason;
}

ClientNetwork::ClientNetwork(int index) {
  const std::string id = std::to_string(::getpid());
  name_ = "dlock-nm-" + id + "-" + std::to_string(index);
  host_if_ = "dlh" + id + "x" + std::to_string(index);
  inner_if_ = "dln" + id + "x" + std::to_string(index);
  const std::string& inner_if = inner_if_;
  host_ip_ = address(index, 1);
  inner_ip_ = address(index, 2);
  // Left over by a killed earlier process with the same pid: gone first.
  run("ip netns del " + name_);
  run("ip link del " + host_if_);
  const bool made = run("ip netns add " + name_) &&
                    run("ip link add " + host_if_ + " type veth peer name " + inner_if + " netns " + name_) &&
                    run("ip addr add " + host_ip_ + "/30 dev " + host_if_) && run("ip link set " + host_if_ + " up") &&
                    run("ip -n " + name_ + " addr add " + inner_ip_ + "/30 dev " + inner_if) &&
                    run("ip -n " + name_ + " link set " + inner_if + " up") &&
                    run("ip -n " + name_ + " link set lo up");
  if (!made) {
    run("ip link del " + host_if_);
    run("ip netns del " + name_);
    throw std::runtime_error("cannot make network namespace " + name_);
  }
}

ClientNetwork::~ClientNetwork() {
  run("ip link del " + host_if_);  // and its peer in the namespace
  run("ip netns del " + name_);    // and the rules inside it
}

bool ClientNetwork::cut() {
  if (cut_) return true;
  const std::string in = "ip netns exec " + name_ + " iptables -w 5 ";
  cut_ = run(in + "-I INPUT -s " + host_ip_ + " -j DROP") && run(in + "-I OUTPUT -d " + host_ip_ + " -j DROP");
  return cut_;
}

bool ClientNetwork::heal() {
  if (!cut_) return true;
  const std::string in = "ip netns exec " + name_ + " iptables -w 5 ";
  const bool a = run(in + "-D INPUT -s " + host_ip_ + " -j DROP");
  const bool b = run(in + "-D OUTPUT -d " + host_ip_ + " -j DROP");
  cut_ = !(a && b);
  return !cut_;
}

bool ClientNetwork::degrade(int loss_percent, int rate_kbit) {
  if (loss_percent_ > 0 || loss_percent <= 0 || loss_percent >= 100 || rate_kbit <= 0) return false;
  const std::string in = "ip netns exec " + name_ + " iptables -w 5 ";
  const std::string p = "0." + std::string(loss_percent < 10 ? "0" : "") + std::to_string(loss_percent);
  const std::string drop = " -m statistic --mode random --probability " + p + " -j DROP";
  loss_percent_ = loss_percent;
  // The queue holds up to half a second of traffic at that rate; what does
  // not fit is dropped too, as on a congested link.
  const bool ok = run(in + "-I INPUT -s " + host_ip_ + drop) && run(in + "-I OUTPUT -d " + host_ip_ + drop) &&
                  run("ip netns exec " + name_ + " tc qdisc replace dev " + inner_if_ + " root tbf rate " +
                      std::to_string(rate_kbit) + "kbit burst 3000 latency 500ms");
  if (!ok) restore();
  return ok;
}

bool ClientNetwork::restore() {
  if (loss_percent_ == 0) return true;
  const std::string in = "ip netns exec " + name_ + " iptables -w 5 ";
  const std::string p = "0." + std::string(loss_percent_ < 10 ? "0" : "") + std::to_string(loss_percent_);
  const std::string drop = " -m statistic --mode random --probability " + p + " -j DROP";
  (void)run(in + "-D INPUT -s " + host_ip_ + drop);
  (void)run(in + "-D OUTPUT -d " + host_ip_ + drop);
  (void)run("ip netns exec " + name_ + " tc qdisc del dev " + inner_if_ + " root");
  const bool clean = !run("ip netns exec " + name_ + " iptables -w 5 -S | grep -q statistic") &&
                     !run("ip netns exec " + name_ + " tc qdisc show dev " + inner_if_ + " | grep -q tbf");
  if (clean) loss_percent_ = 0;
  return clean;
}

}  // namespace dlock::test
