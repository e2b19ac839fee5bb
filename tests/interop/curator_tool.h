// curator_tool.h — Apache Curator on the other side of an interop test: the command line
// that starts tests/interop/java/CuratorTool.java, what its lines mean, and the files its
// `contend` mode shares with a C++ contender. Link dlock::curator_tool to use it.
//
// Thread-safety: plain functions; the file helpers may run in several processes at once
// (that is their point), and only the O_APPEND interval log is safe without the lock.
//
// Example (the protocol is in the comment at the top of CuratorTool.java):
//   using namespace std::chrono_literals;
//   dlock::test::ChildProcess java(dlock::test::curator_tool_command(
//       {dlock::test::server_url("zookeeper"), "mutex", "/interop/a"}));
//   ASSERT_EQ(java.read_line(dlock::test::scaled(30s)), "ready");  // the JVM takes ~1 s
//   java.write_line("lock");
//   auto held = dlock::test::parse_curator_acquired(java.read_line(dlock::test::scaled(10s)).value_or(""));
//   ASSERT_TRUE(held);  // held->node is "_c_<uuid>-lock-0000000003", held->sequence 3
//   ...                 // a dlock mutex on zk://…/interop/a must not get it now
//   java.write_line("unlock");
//   ASSERT_EQ(java.read_line(dlock::test::scaled(10s)), "released");
//
// The child dies with the test (ChildProcess sets PDEATHSIG) and exits by itself when its
// stdin closes, even while it waits for a lock; its session is closed on the way out.
#pragma once

#include "curator_tool_paths.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace dlock::test {

// argv for ChildProcess: java (quick-start flags for a short-lived JVM) -cp … CuratorTool ARGS.
// ARGS as in CuratorTool.java, e.g. {url, "mutex", path}, {url, "rwlock", path},
// {"contend", url, path, "100", counter_file, interval_log, "--wait-go"}. A dlock URL
// (zk://host:port,…/chroot?…) is accepted where Curator wants a connect string.
inline std::vector<std::string> curator_tool_command(const std::vector<std::string>& args) {
  // Quick start over peak speed (C1 only), and only Curator's warnings on stderr.
  std::vector<std::string> argv{curator_tool_java,
                                "-Xmx96m",
                                "-XX:+UseSerialGC",
                                "-XX:TieredStopAtLevel=1",
                                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                                "-cp",
                                curator_tool_classpath,
                                "CuratorTool"};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// An "acquired NODE CZXID" line: the lock's znode name, its sequence number (the 10 digits
// ZooKeeper appended) and the zxid that created it.
struct CuratorAcquired {
  std::string node;
  std::uint64_t sequence = 0;
  std::int64_t czxid = 0;
};

inline std::optional<CuratorAcquired> parse_curator_acquired(const std::string& line) {
  std::istringstream in(line);
  std::string word;
  CuratorAcquired a;
  if (!(in >> word >> a.node >> a.czxid) || word != "acquired" || a.node.size() < 10) return std::nullopt;
  const std::string digits = a.node.substr(a.node.size() - 10);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  a.sequence = std::stoull(digits);
  return a;
}

// The contend oracle's counter file: a decimal integer and a newline; empty or missing is 0.
// Read → (work) → write is deliberately not atomic: only the lock under test protects it.
inline std::int64_t read_counter_file(const std::string& path) {
  std::ifstream in(path);
  std::int64_t value = 0;
  if (in >> value) return value;
  return 0;
}

inline void write_counter_file(const std::string& path, std::int64_t value) {
  std::ofstream out(path, std::ios::trunc);
  out << value << "\n";
  if (!out.flush()) throw std::runtime_error("cannot write counter file " + path);
}

// One critical section: its holder's tag and its bounds in steady_clock nanoseconds
// (CLOCK_MONOTONIC; Java's System.nanoTime() on Linux reads the same clock).
struct Interval {
  std::string tag;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

// Appends "TAG START END\n" in one write() to an O_APPEND file, as CuratorTool does, so the
// lines of concurrent writers never interleave.
inline void append_interval(const std::string& path, const Interval& i) {
  const std::string line = i.tag + " " + std::to_string(i.start_ns) + " " + std::to_string(i.end_ns) + "\n";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot open interval log " + path);
  ssize_t n;
  do {
    n = ::write(fd, line.data(), line.size());
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n != static_cast<ssize_t>(line.size())) throw std::runtime_error("cannot append to interval log " + path);
}

inline std::vector<Interval> read_intervals(const std::string& path) {
  std::ifstream in(path);
  std::vector<Interval> all;
  Interval i;
  while (in >> i.tag >> i.start_ns >> i.end_ns) all.push_back(i);
  return all;
}

// Pairs of intervals that overlap (mutual exclusion failed), after sorting by start.
inline std::vector<std::pair<Interval, Interval>> overlapping_intervals(std::vector<Interval> all) {
  std::sort(all.begin(), all.end(), [](const Interval& a, const Interval& b) { return a.start_ns < b.start_ns; });
  std::vector<std::pair<Interval, Interval>> bad;
  std::int64_t reach = std::numeric_limits<std::int64_t>::min();  // the latest end so far
  const Interval* reacher = nullptr;
  for (const auto& i : all) {
    if (reacher && i.start_ns < reach) bad.emplace_back(*reacher, i);
    if (i.end_ns > reach) {
      reach = i.end_ns;
      reacher = &i;
    }
  }
  return bad;
}

// How often the holder's tag changes from one interval to the next: real handoffs between
// the Java and C++ sides (0 means one side did all its work before the other started).
inline std::size_t tag_changes(std::vector<Interval> all) {
  std::sort(all.begin(), all.end(), [](const Interval& a, const Interval& b) { return a.start_ns < b.start_ns; });
  std::size_t changes = 0;
  for (std::size_t k = 1; k < all.size(); ++k) changes += all[k].tag != all[k - 1].tag;
  return changes;
}

}  // namespace dlock::test
