#include "tcp_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <string_view>

namespace dlock::test {
namespace {

sockaddr_in loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  return addr;
}

// Moves what is readable on `from` to `to`; false if either side closed.
// Bytes that contain a non-empty `marker` are not moved but kept in
// `dropped` (and `marker` cleared): false too.
bool relay(int from, int to, std::string& marker, std::string& dropped) {
  char buf[16384];
  ssize_t got = ::read(from, buf, sizeof buf);
  if (got <= 0) return false;
  if (!marker.empty() && std::string_view(buf, static_cast<std::size_t>(got)).find(marker) != std::string_view::npos) {
    dropped.assign(buf, static_cast<std::size_t>(got));
    marker.clear();
    return false;
  }
  for (ssize_t sent = 0; sent < got;) {
    ssize_t n = ::write(to, buf + sent, static_cast<std::size_t>(got - sent));
    if (n <= 0) return false;
    sent += n;
  }
  return true;
}

}  // namespace

TcpProxy::TcpProxy(int target_port) : TcpProxy(target_port, "127.0.0.1") {}

TcpProxy::TcpProxy(int target_port, const std::string& listen_ip) : target_port_(target_port) {
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  auto addr = loopback(0);
  if (::inet_pton(AF_INET, listen_ip.c_str(), &addr.sin_addr) != 1)
    throw std::runtime_error("tcp proxy: not an IPv4 address: " + listen_ip);
  socklen_t len = sizeof addr;
  if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listener_, 64) != 0 ||
      ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0 || ::pipe2(wake_, O_CLOEXEC) != 0)
    throw std::runtime_error("tcp proxy: cannot listen on " + listen_ip);
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { run(); });
}

TcpProxy::~TcpProxy() {
  stopping_ = true;
  (void)!::write(wake_[1], "x", 1);
  thread_.join();
  for (auto& p : pairs_) {
    ::close(p.client);
    ::close(p.server);
  }
  ::close(listener_);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void TcpProxy::black_hole(bool on) {
  black_hole_ = on;
  (void)!::write(wake_[1], "x", 1);
}

void TcpProxy::cut() {
  {
    std::lock_guard lk(mu_);
    cut_ = true;
  }
  (void)!::write(wake_[1], "x", 1);
}

void TcpProxy::cut_at_reply(std::string marker, bool then_black_hole) {
  std::lock_guard lk(mu_);
  reply_marker_ = std::move(marker);
  black_hole_after_ = then_black_hole;
  dropped_.clear();
}

std::string TcpProxy::dropped_reply() {
  std::lock_guard lk(mu_);
  return dropped_;
}

void TcpProxy::run() {
  while (!stopping_) {
    {
      std::lock_guard lk(mu_);
      if (cut_) {
        for (auto& p : pairs_) {
          ::close(p.client);
          ::close(p.server);
        }
        pairs_.clear();
        cut_ = false;
      }
    }
    const bool silent = black_hole_;
    std::vector<pollfd> fds{{wake_[0], POLLIN, 0}, {listener_, POLLIN, 0}};
    if (!silent)
      for (const auto& p : pairs_) {
        fds.push_back({p.client, POLLIN, 0});
        fds.push_back({p.server, POLLIN, 0});
      }
    if (::poll(fds.data(), fds.size(), 200) < 0) continue;
    if (fds[0].revents & POLLIN) {
      char buf[64];
      (void)!::read(wake_[0], buf, sizeof buf);
    }
    if (fds[1].revents & POLLIN) {
      int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client >= 0) {
        int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        auto addr = loopback(target_port_);
        if (::connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
          std::lock_guard lk(mu_);
          pairs_.push_back({client, server});
        } else {
          ::close(client);
          ::close(server);
        }
      }
    }
    if (silent) continue;
    std::lock_guard lk(mu_);
    std::string no_marker;
    for (std::size_t i = 2; i + 1 < fds.size(); i += 2) {
      const std::size_t k = (i - 2) / 2;
      bool ok = true;
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) ok = relay(fds[i].fd, fds[i + 1].fd, no_marker, dropped_);
      if (ok && (fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) {
        const bool armed = !reply_marker_.empty();
        ok = relay(fds[i + 1].fd, fds[i].fd, reply_marker_, dropped_);
        if (armed && reply_marker_.empty()) {  // the marked reply was dropped: cut them all
          cut_ = true;
          if (black_hole_after_) black_hole_ = true;
        }
      }
      if (!ok) {
        ::close(pairs_[k].client);
        ::close(pairs_[k].server);
        pairs_[k] = {-1, -1};
      }
    }
    std::erase_if(pairs_, [](const Pair& p) { return p.client < 0; });
  }
}

}  // namespace dlock::test
