#include "zookeeper_ensemble.h"

#include "ports.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <poll.h>
#include <stdexcept>
#include <thread>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

}  // namespace

ZooKeeperEnsemble::ZooKeeperEnsemble(const std::string& dir, int nodes) : nodes_(static_cast<std::size_t>(nodes)) {
  for (int i = 0; i < nodes; ++i) {
    Node& n = nodes_[i];
    n.dir = dir + "/zk" + std::to_string(i + 1);
    ::mkdir(n.dir.c_str(), 0700);
    ::mkdir((n.dir + "/data").c_str(), 0700);
    n.client_port = free_port();
    n.quorum_port = free_port();
    n.election_port = free_port();
    std::ofstream(n.dir + "/data/myid") << i + 1 << "\n";
  }
  for (int i = 0; i < nodes; ++i) write_config(i);
  for (int i = 0; i < nodes; ++i) start(i);
  if (!wait_serving(scaled(30s))) throw std::runtime_error("ZooKeeper did not start serving (logs in " + dir + ")");
}

ZooKeeperEnsemble::~ZooKeeperEnsemble() {
  for (auto& n : nodes_) n.process.reset();  // SIGKILL and reap
}

void ZooKeeperEnsemble::write_config(int node) const {
  const Node& n = nodes_[node];
  std::ofstream cfg(n.dir + "/zoo.cfg");
  cfg << "tickTime=500\ninitLimit=10\nsyncLimit=4\n"
      << "dataDir=" << n.dir << "/data\n"
      << "clientPort=" << n.client_port << "\nclientPortAddress=127.0.0.1\n"
      << "minSessionTimeout=1000\nmaxSessionTimeout=10000\n"
      << "admin.enableServer=false\n4lw.commands.whitelist=srvr,cons,stat,ruok\n"
      << "forceSync=no\n";
  if (nodes_.size() > 1)
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      cfg << "server." << i + 1 << "=127.0.0.1:" << nodes_[i].quorum_port << ":" << nodes_[i].election_port << "\n";
}

void ZooKeeperEnsemble::start(int node) {
  Node& n = nodes_[node];
  n.process = std::make_unique<ChildProcess>(std::vector<std::string>{
      "/bin/sh", "-c",
      "exec java -Xmx128m -XX:+UseSerialGC -Dzookeeper.log.dir=" + n.dir +
          " -cp /usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar "
          "org.apache.zookeeper.server.quorum.QuorumPeerMain " +
          n.dir + "/zoo.cfg > " + n.dir + "/server.log 2>&1"});
}

void ZooKeeperEnsemble::kill(int node) {
  nodes_[node].process.reset();
}

pid_t ZooKeeperEnsemble::pid(int node) const { return nodes_[node].process ? nodes_[node].process->pid() : -1; }

std::string ZooKeeperEnsemble::url() const {
  std::string out = "zk://";
  for (std::size_t i = 0; i < nodes_.size(); ++i)
    out += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(nodes_[i].client_port);
  return out;
}

std::string ZooKeeperEnsemble::ask(int node, const std::string& word) const {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(nodes_[node].client_port));
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::write(fd, word.data(), word.size()) == static_cast<ssize_t>(word.size())) {
    const auto until = steady::now() + 2s;
    char buf[4096];
    pollfd p{fd, POLLIN, 0};
    while (steady::now() < until && ::poll(&p, 1, 200) >= 0) {
      if (!(p.revents & (POLLIN | POLLHUP))) continue;
      ssize_t got = ::read(fd, buf, sizeof buf);
      if (got <= 0) break;
      out.append(buf, static_cast<std::size_t>(got));
    }
  }
  ::close(fd);
  return out;
}

std::string ZooKeeperEnsemble::mode(int node) const {
  if (!nodes_[node].process) return "";
  const std::string answer = ask(node, "srvr");
  auto at = answer.find("Mode: ");
  if (at == std::string::npos) return "";
  return answer.substr(at + 6, answer.find('\n', at) - at - 6);
}

int ZooKeeperEnsemble::leader() const {
  for (int i = 0; i < size(); ++i)
    if (mode(i) == "leader" || mode(i) == "standalone") return i;
  return -1;
}

bool ZooKeeperEnsemble::wait_serving(std::chrono::milliseconds limit) const {
  const auto until = steady::now() + limit;
  while (steady::now() < until) {
    bool all = true;
    for (int i = 0; i < size() && all; ++i)
      if (nodes_[i].process && mode(i).empty()) all = false;
    if (all && leader() >= 0) return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

}  // namespace dlock::test
