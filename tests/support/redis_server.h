// redis_server.h — a test fixture that runs a redis-server of its own for
// each test (its child, on a free port, with its data in a temp dir): for
// the tests that stop, restart or reconfigure it, or read its keys and
// connections with redis-cli. Header only: it needs gtest, which the tests
// link.
#pragma once

#include "child_process.h"
#include "ports.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace dlock::test {

class OwnRedisServer : public ::testing::Test {
 protected:
  using steady = std::chrono::steady_clock;

  void SetUp() override { start(); }
  void TearDown() override { stop(); }

  // redis-server runs in the foreground as this process's child, so it dies
  // with the test even if the test crashes (ChildProcess sets PDEATHSIG).
  void start(std::vector<std::string> extra = {}, std::string port = "") {
    using namespace std::chrono_literals;
    for (int attempt = 0; attempt < 20 && !server_; ++attempt) {
      port_ = port.empty() ? std::to_string(free_port()) : port;
      std::vector<std::string> args{"/usr/bin/redis-server", "--port", port_, "--bind", "127.0.0.1",
                                    "--dir", dir_.path(), "--logfile", dir_.path() + "/redis.log",
                                    "--save", "", "--appendonly", "no"};
      args.insert(args.end(), extra.begin(), extra.end());
      auto child = std::make_unique<ChildProcess>(args);
      const auto until = steady::now() + scaled(5s);
      while (steady::now() < until && !child->wait(0ms)) {
        auto reply = cli("PING");  // PONG, or NOAUTH with a password: either way it serves
        if (reply.find("PONG") != std::string::npos || reply.find("NOAUTH") != std::string::npos) {
          server_ = std::move(child);
          extra_ = extra;
          return;
        }
        std::this_thread::sleep_for(20ms);
      }
      std::this_thread::sleep_for(50ms);  // the port was taken, or the old socket lingers
    }
    FAIL() << "redis-server did not start (see " << dir_.path() << "/redis.log)";
  }
  void stop() {
    using namespace std::chrono_literals;
    if (!server_) return;
    server_->signal(SIGCONT);
    server_->signal(SIGTERM);
    (void)server_->wait(scaled(5s));
    server_.reset();  // SIGKILLs it if it is still running
  }
  // A fresh server (empty data) on the same port.
  void restart() {
    stop();
    start(extra_, port_);
  }
  std::string base_url() const { return "redis://127.0.0.1:" + port_; }
  const std::string& port() const { return port_; }
  pid_t server_pid() const { return server_ ? server_->pid() : -1; }
  std::string cli(const std::string& args, const std::string& auth = "") const {
    return shell_output("redis-cli -h 127.0.0.1 -p " + port() + " " + auth + " " + args + " 2>/dev/null");
  }
  // Connections the server has open (CLIENT LIST lines), minus redis-cli's own.
  int connections() const {
    auto out = cli("CLIENT LIST");
    return static_cast<int>(std::count(out.begin(), out.end(), '\n')) - 1;
  }

  TempDir dir_;
  std::unique_ptr<ChildProcess> server_;
  std::string port_;
  std::vector<std::string> extra_;
};

}  // namespace dlock::test
