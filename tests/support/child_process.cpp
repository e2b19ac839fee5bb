#include "child_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <thread>
#include <vector>

namespace dlock::test {

ChildProcess::ChildProcess(const std::vector<std::string>& argv) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test that started it
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  in_ = in[1];
  out_ = out[0];
}

ChildProcess::~ChildProcess() {
  if (!status_) {
    ::kill(pid_, SIGKILL);
    ::kill(pid_, SIGCONT);
    int st = 0;
    ::waitpid(pid_, &st, 0);
  }
  ::close(in_);
  ::close(out_);
}

void ChildProcess::write_line(const std::string& line) {
  std::string data = line + "\n";
  if (::write(in_, data.data(), data.size()) != static_cast<ssize_t>(data.size()))
    throw std::runtime_error("write to child failed");
}

std::optional<std::string> ChildProcess::read_line(std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (auto nl = buffer_.find('\n'); nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{out_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[512];
    ssize_t n = ::read(out_, buf, sizeof buf);
    if (n <= 0) return std::nullopt;
    buffer_.append(buf, static_cast<std::size_t>(n));
  }
}

void ChildProcess::signal(int sig) { ::kill(pid_, sig); }

std::optional<int> ChildProcess::wait(std::chrono::milliseconds timeout) {
  if (status_) return status_;
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) == pid_) {
      status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      return status_;
    }
    if (std::chrono::steady_clock::now() >= until) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::chrono::milliseconds scaled(std::chrono::milliseconds d) {
  static const double scale = [] {
    const char* s = std::getenv("DLOCK_TEST_TIME_SCALE");
    double v = s ? std::atof(s) : 1.0;
    return v > 0 ? v : 1.0;
  }();
  return std::chrono::milliseconds(static_cast<std::int64_t>(static_cast<double>(d.count()) * scale));
}

namespace {

bool all_threads_stopped(pid_t pid) {
  std::error_code error;
  std::size_t threads = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", error)) {
    std::ifstream in(task.path() / "stat");
    const std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto end_of_name = stat.rfind(')');  // the name may hold spaces and parentheses
    if (end_of_name == std::string::npos || end_of_name + 2 >= stat.size() || stat[end_of_name + 2] != 'T')
      return false;
    ++threads;
  }
  return !error && threads > 0;
}

}  // namespace

bool stop_process(pid_t pid, std::chrono::milliseconds limit) {
  if (::kill(pid, SIGSTOP) != 0) return false;
  return eventually([&] { return all_threads_stopped(pid); }, limit);
}

std::string shell_output(const std::string& command) {
  std::string out;
  if (FILE* p = ::popen(command.c_str(), "r")) {
    char buf[4096];
    while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    ::pclose(p);
  }
  return out;
}

namespace {

// gRPC's process-wide pools, by the names gRPC gives their threads (cut to
// the kernel's 15 characters): the timer pool, the two executors and the
// event engine's pool and timer manager, which add threads while busy and
// keep them for a while after the process's last channel goes (seen under
// load: a failure listed three event_engine threads and a timer_manager).
bool grpc_pool_thread(const std::string& name) {
  return name == "grpc_global_tim" || name == "default-executo" || name == "resolver-execut" ||
         name == "event_engine" || name == "timer_manager";
}

std::vector<std::string> thread_names_with_grpc() {
  std::vector<std::string> names;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
      std::string name;
      std::getline(comm, name);
      names.push_back(name);
    }
    ::closedir(d);
  }
  return names;
}

}  // namespace

int thread_count() {
  int n = 0;
  for (const auto& name : thread_names_with_grpc())
    if (!grpc_pool_thread(name)) ++n;
  return n;
}

std::string thread_names() {
  std::string out;
  for (const auto& name : thread_names_with_grpc()) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/dlock-test-XXXXXX";
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace dlock::test
