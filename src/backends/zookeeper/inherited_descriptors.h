// inherited_descriptors.h — keeping the ZooKeeper C client's descriptors out
// of programs this process runs.
//
// The C client marks none of its descriptors close-on-exec: its wake-up
// pipe and its socket to the ensemble would pass to every command a
// fork + exec starts (dlock run's, or the user's own). Marking them from
// our threads would race with the client's I/O thread, which opens and
// closes its socket at any time. So the marking happens in the child of a
// fork, where only one thread runs: a pthread_atfork handler sets
// FD_CLOEXEC on every socket connected to a registered ensemble port and on
// every registered pipe. posix_spawn() runs no fork handlers; a program
// that spawns that way while a session is open passes them on.
#pragma once

#include <set>

namespace dlock::detail::zookeeper {

// What one session owns; registered for its lifetime.
class InheritedDescriptors {
 public:
  explicit InheritedDescriptors(std::set<int> ensemble_ports);
  ~InheritedDescriptors();
  InheritedDescriptors(const InheritedDescriptors&) = delete;
  InheritedDescriptors& operator=(const InheritedDescriptors&) = delete;

  // Call around zookeeper_init: the pipes that appear meanwhile are the
  // client's (found by their /proc links, without touching the descriptors).
  void before_init();
  void after_init();

 private:
  std::set<int> ports_;
  std::set<int> pipes_;
  std::set<int> seen_;  // descriptors open before zookeeper_init
};

}  // namespace dlock::detail::zookeeper
