#include "backends/zookeeper/inherited_descriptors.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace dlock::detail::zookeeper {
namespace {

// Every live session's ports and pipes. The fork handlers hold the mutex
// across fork(), so the child sees a consistent copy and reads it without
// locking or allocating.
struct Registry {
  std::mutex mu;
  std::vector<int> ports;  // one entry per (session, port)
  std::vector<int> pipes;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: fork handlers may run at exit
  return *r;
}

// Descriptor numbers, from /proc/self/fd (names only: nothing is done to
// the descriptors themselves).
std::set<int> descriptor_numbers() {
  std::set<int> fds;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.' && std::atoi(e->d_name) != ::dirfd(d)) fds.insert(std::atoi(e->d_name));
    ::closedir(d);
  }
  return fds;
}

bool is_pipe(int fd) {
  char link[64];
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  ssize_t n = ::readlink(path.c_str(), link, sizeof link - 1);
  return n > 5 && std::memcmp(link, "pipe:", 5) == 0;
}

void close_on_exec(int fd) {
  int flags = ::fcntl(fd, F_GETFD);
  if (flags >= 0 && !(flags & FD_CLOEXEC)) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// In the child of a fork: one thread, async-signal-safe calls only.
void mark_in_child() {
  Registry& r = registry();
  for (int fd : r.pipes) close_on_exec(fd);
  if (r.ports.empty()) return;
  int dir = ::open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return;
  alignas(8) char buf[4096];
  for (;;) {
    long n = ::syscall(SYS_getdents64, dir, buf, sizeof buf);
    if (n <= 0) break;
    for (long at = 0; at < n;) {
      struct entry {
        std::uint64_t ino;
        std::int64_t off;
        unsigned short reclen;
        unsigned char type;
        char name[1];
      };
      const auto* e = reinterpret_cast<const entry*>(buf + at);
      at += e->reclen;
      int fd = 0;
      bool number = e->name[0] != '\0';
      for (const char* c = e->name; *c; ++c) {
        if (*c < '0' || *c > '9') number = false;
        else fd = fd * 10 + (*c - '0');
      }
      if (!number || fd == dir) continue;
      struct stat st {};
      sockaddr_storage peer{};
      socklen_t len = sizeof peer;
      if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode) ||
          ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0)
        continue;
      int port = peer.ss_family == AF_INET    ? ntohs(reinterpret_cast<sockaddr_in*>(&peer)->sin_port)
                 : peer.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&peer)->sin6_port)
                                              : -1;
      if (contains(r.ports, port)) close_on_exec(fd);
    }
  }
  ::close(dir);
}

void install_fork_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    ::pthread_atfork([] { registry().mu.lock(); },  // prepare: a consistent registry across fork()
                     [] { registry().mu.unlock(); },
                     [] {
                       mark_in_child();
                       registry().mu.unlock();
                     });
  });
}

}  // namespace

InheritedDescriptors::InheritedDescriptors(std::set<int> ensemble_ports) : ports_(std::move(ensemble_ports)) {
  install_fork_handlers();
  std::lock_guard lk(registry().mu);
  registry().ports.insert(registry().ports.end(), ports_.begin(), ports_.end());
}

InheritedDescriptors::~InheritedDescriptors() {
  std::lock_guard lk(registry().mu);
  auto& r = registry();
  for (int p : ports_)
    if (auto it = std::find(r.ports.begin(), r.ports.end(), p); it != r.ports.end()) r.ports.erase(it);
  for (int fd : pipes_)
    if (auto it = std::find(r.pipes.begin(), r.pipes.end(), fd); it != r.pipes.end()) r.pipes.erase(it);
}

void InheritedDescriptors::before_init() { seen_ = descriptor_numbers(); }

void InheritedDescriptors::after_init() {
  std::set<int> added;
  for (int fd : descriptor_numbers())
    if (!seen_.contains(fd) && is_pipe(fd)) added.insert(fd);
  std::lock_guard lk(registry().mu);
  auto& r = registry();
  // The previous handle's pipes (a session replaced after expiry) are closed by now.
  for (int fd : pipes_)
    if (auto it = std::find(r.pipes.begin(), r.pipes.end(), fd); it != r.pipes.end()) r.pipes.erase(it);
  pipes_ = std::move(added);
  r.pipes.insert(r.pipes.end(), pipes_.begin(), pipes_.end());
}

}  // namespace dlock::detail::zookeeper
