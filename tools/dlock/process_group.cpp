#include "process_group.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <new>
#include <stdexcept>
#include <thread>
#include <vector>

namespace dlock::cli {
namespace {

constexpr std::size_t align_up(std::size_t n) { return (n + 63) & ~std::size_t{63}; }

// How long children may take to connect before the run is called off.
constexpr std::chrono::seconds start_timeout{30};
// How long past `limit` the parent waits before killing children.
constexpr std::chrono::seconds exit_grace{15};

std::runtime_error os_failure(const std::string& step) {
  return std::runtime_error(step + ": " + std::strerror(errno));
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* name = ::strsignal(sig);  // the parent is single-threaded
    return "was killed by signal " + std::to_string(sig) + " (" + (name ? name : "?") + ")";
  }
  return "ended with wait status " + std::to_string(status);
}

}  // namespace

const char* to_string(StopReason r) {
  switch (r) {
    case StopReason::done: return "done";
    case StopReason::time_up: return "time";
    case StopReason::max_ops: return "max_ops";
    case StopReason::time_limit: return "time_limit";
  }
  return "?";
}

struct ProcessGroup::Control {
  std::atomic<int> ready;
  std::atomic<int> go;  // 0 wait, 1 go, -1 called off
  std::atomic<std::int64_t> go_ns;
};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<std::int64_t>::is_always_lock_free,
              "shared-memory atomics must be lock-free to work across processes");

struct ProcessGroup::ProcessRecord {
  char error[480];
};

ProcessGroup::ProcessGroup(int processes, int threads_per_process, std::size_t user_bytes)
    : processes_(processes), threads_(threads_per_process) {
  if (processes < 1 || threads_per_process < 1) throw std::invalid_argument("need at least 1 process and 1 thread");
  const std::size_t control_at = 0;
  const std::size_t records_at = align_up(control_at + sizeof(Control));
  const std::size_t slots_at = align_up(records_at + sizeof(ProcessRecord) * static_cast<std::size_t>(processes));
  const std::size_t user_at =
      align_up(slots_at + sizeof(WorkerSlot) * static_cast<std::size_t>(processes * threads_per_process));
  bytes_ = align_up(user_at + std::max<std::size_t>(user_bytes, 1));

  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp && *tmp == '/' ? tmp : "/tmp") + "/dlock-shm-XXXXXX";
  if (!::mkdtemp(dir.data())) throw os_failure("creating a temporary directory for the shared store");
  const std::string file = dir + "/store";
  int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    auto e = os_failure("creating " + file);
    ::rmdir(dir.c_str());
    throw e;
  }
  void* p = MAP_FAILED;
  if (::ftruncate(fd, static_cast<off_t>(bytes_)) == 0)
    p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  auto failure = p == MAP_FAILED ? os_failure("mapping " + file) : std::runtime_error("");
  ::close(fd);
  // The mapping keeps the memory alive (and forked children inherit it):
  // remove the names now so nothing is left behind, whatever happens later.
  ::unlink(file.c_str());
  ::rmdir(dir.c_str());
  if (p == MAP_FAILED) throw failure;
  base_ = p;
  auto* bytes = static_cast<char*>(p);
  control_ = new (bytes + control_at) Control{};
  records_ = reinterpret_cast<ProcessRecord*>(bytes + records_at);
  slots_ = reinterpret_cast<WorkerSlot*>(bytes + slots_at);
  user_ = bytes + user_at;
}

ProcessGroup::~ProcessGroup() {
  if (base_) ::munmap(base_, bytes_);
}

WorkerSlot& ProcessGroup::slot(int process, int thread) noexcept { return slots_[process * threads_ + thread]; }

steady::time_point ProcessGroup::wait_for_start() {
  control_->ready.fetch_add(1);
  for (;;) {
    int go = control_->go.load();
    if (go == 1) return steady::time_point(std::chrono::nanoseconds(control_->go_ns.load()));
    if (go < 0) throw std::runtime_error("called off: another worker process failed to start");
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

steady::time_point ProcessGroup::start_time() const noexcept {
  return steady::time_point(std::chrono::nanoseconds(control_->go_ns.load()));
}

steady::time_point ProcessGroup::end_time() noexcept {
  std::int64_t latest = control_->go_ns.load();
  for (int i = 0; i < processes_ * threads_; ++i) latest = std::max(latest, slots_[i].end_ns);
  return steady::time_point(std::chrono::nanoseconds(latest));
}

void ProcessGroup::run(const std::function<void(int process)>& body, std::chrono::milliseconds limit) {
  control_->ready = 0;
  control_->go = 0;
  control_->go_ns = 0;
  const auto workers = static_cast<std::size_t>(processes_ * threads_);
  std::memset(static_cast<void*>(records_), 0, sizeof(ProcessRecord) * static_cast<std::size_t>(processes_));
  std::memset(static_cast<void*>(slots_), 0, sizeof(WorkerSlot) * workers);
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  std::vector<pid_t> pids;
  for (int i = 0; i < processes_; ++i) {
    pid_t pid = ::fork();
    if (pid < 0) {
      auto e = os_failure("fork");
      control_->go = -1;
      for (pid_t p : pids) ::kill(p, SIGKILL);
      for (pid_t p : pids) ::waitpid(p, nullptr, 0);
      throw e;
    }
    if (pid == 0) {
      // Die with the parent, never outlive it holding locks.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(2);
      int code = 0;
      try {
        body(i);
      } catch (const std::exception& e) {
        std::snprintf(records_[i].error, sizeof records_[i].error, "%s", e.what());
        code = 1;
      } catch (...) {
        std::snprintf(records_[i].error, sizeof records_[i].error, "unknown exception");
        code = 1;
      }
      // _exit: no atexit handlers or stdio flushes inherited from the parent.
      ::_exit(code);
    }
    pids.push_back(pid);
  }

  std::vector<int> statuses(pids.size(), -1);
  std::size_t running = pids.size();
  auto reap = [&](bool block) {
    for (std::size_t i = 0; i < pids.size(); ++i) {
      if (statuses[i] != -1) continue;
      int st = 0;
      pid_t r = ::waitpid(pids[i], &st, block ? 0 : WNOHANG);
      if (r == pids[i]) {
        statuses[i] = st;
        --running;
      }
    }
  };
  auto failed = [&] {
    for (int st : statuses)
      if (st != -1 && st != 0) return true;
    return false;
  };

  // Everyone connected (or someone failed): let them go together.
  const auto give_up = steady::now() + start_timeout;
  while (control_->ready.load() < processes_ && !failed() && steady::now() < give_up) {
    reap(false);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  bool start_failed = control_->ready.load() < processes_;
  if (start_failed) {
    control_->go = -1;
  } else {
    control_->go_ns = steady_ns(steady::now());
    control_->go = 1;
  }

  const auto kill_at = steady::now() + limit + exit_grace;
  bool killed = false;
  while (running > 0) {
    reap(false);
    if (running == 0) break;
    if (!killed && steady::now() >= kill_at) {
      for (std::size_t i = 0; i < pids.size(); ++i)
        if (statuses[i] == -1) ::kill(pids[i], SIGKILL);
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }

  std::string problems;
  for (std::size_t i = 0; i < pids.size(); ++i) {
    if (statuses[i] == 0) continue;
    problems += "\n  worker process " + std::to_string(i) + " (pid " + std::to_string(pids[i]) + ") " +
                describe_exit(statuses[i]);
    if (records_[i].error[0]) problems += ": " + std::string(records_[i].error);
  }
  if (killed) problems += "\n  (killed: still running " + std::to_string((limit + exit_grace).count() / 1000) +
                          " s after the start)";
  if (start_failed && problems.empty()) problems = "\n  worker processes did not get ready in time";
  if (!problems.empty()) throw std::runtime_error("a worker process failed:" + problems);
}

void run_threads(int n, const std::function<void(int thread)>& fn) {
  std::mutex mu;
  std::exception_ptr first;
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < n; ++i)
      threads.emplace_back([&, i] {
        try {
          fn(i);
        } catch (...) {
          std::lock_guard lk(mu);
          if (!first) first = std::current_exception();
        }
      });
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace dlock::cli
