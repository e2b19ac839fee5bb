#include "ports.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>

namespace dlock::test {
namespace {

// Binds 127.0.0.1:`port` (0: the kernel picks) and lets it go; the port, or 0.
int bindable(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  socklen_t len = sizeof addr;
  int got = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    got = ntohs(addr.sin_port);
  ::close(fd);
  return got;
}

}  // namespace

int free_port() {
  static std::mutex mu;
  static std::mt19937 random(std::random_device{}());
  static std::set<int> given;  // (none twice: a node's ports are all picked before it binds them)
  std::lock_guard lk(mu);
  int lo = 32768, hi = 60999;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> lo >> hi;
  std::uniform_int_distribution<int> pick(10000, 65535);
  for (int tries = 0; tries < 2000; ++tries) {
    // Outside the ephemeral range; inside it (the kernel's pick) only if
    // that range leaves nothing else.
    const bool outside = lo > 11000 || hi < 64535;
    const int port = outside ? pick(random) : 0;
    if (outside && port >= lo && port <= hi) continue;
    const int got = bindable(port);
    if (got == 0 || given.count(got)) continue;
    given.insert(got);
    return got;
  }
  throw std::runtime_error("no free TCP port on 127.0.0.1");
}

}  // namespace dlock::test
