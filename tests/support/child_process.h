// child_process.h — a test's child process with line-based stdin/stdout pipes.
// It gets SIGKILL if the test process dies (PR_SET_PDEATHSIG).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace dlock::test {

class ChildProcess {
 public:
  // Starts argv[0] with the given arguments; its stdin and stdout are pipes.
  explicit ChildProcess(const std::vector<std::string>& argv);
  ~ChildProcess();  // SIGKILLs and reaps it if still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  void write_line(const std::string& line);
  // The next line of its stdout, or nullopt on timeout or EOF.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout);
  void signal(int sig);
  // Its exit status (128+signal if killed), or nullopt if still running after timeout.
  std::optional<int> wait(std::chrono::milliseconds timeout);

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
  std::string buffer_;
  std::optional<int> status_;
};

// Scales the test's timing margins: DLOCK_TEST_TIME_SCALE (default 1).
std::chrono::milliseconds scaled(std::chrono::milliseconds d);

// Polls `done` every 10 ms until it is true (true) or `limit`, scaled, has
// passed (false).
template <class F>
bool eventually(F done, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + scaled(limit);
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// Sends SIGSTOP to process `pid` and waits until every thread of it is
// stopped (state T in /proc): kill() returns before the signal has reached
// each thread, and a thread still running may yet answer a request. False
// if they are not all stopped within `limit` (scaled).
bool stop_process(pid_t pid, std::chrono::milliseconds limit = std::chrono::seconds(5));

// What `command` (run by /bin/sh) writes to its stdout; empty if it could
// not run.
std::string shell_output(const std::string& command);

// Threads of this process (entries of /proc/self/task), less gRPC's
// process-wide pools (its timer threads, executors and event engine):
// those are the process's (every gRPC channel shares them, an etcd://
// client's included), grow under load and are stopped by gRPC only when
// the process's last channel goes.
int thread_count();

// The names of all of this process's threads, gRPC's included, for a
// failure message.
std::string thread_names();

// A fresh directory under $TMPDIR, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace dlock::test
