#include "history.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace dlock::test {

std::int64_t monotonic_us() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1'000;
}

HistoryWriter::HistoryWriter(const std::string& path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0) throw std::runtime_error("history: cannot open " + path);
}

HistoryWriter::~HistoryWriter() { ::close(fd_); }

void HistoryWriter::append(Event e) {
  if (e.t_us == 0) e.t_us = monotonic_us();
  const std::string line = format_event(e) + "\n";
  (void)!::write(fd_, line.data(), line.size());  // one write: lines of several processes never mix
}

std::string format_event(const Event& e) {
  std::string detail = e.detail.empty() ? "-" : e.detail;
  std::replace(detail.begin(), detail.end(), ' ', '_');
  std::ostringstream out;
  out << e.t_us << ' ' << e.process << ' ' << e.op << ' ' << e.type << ' ' << e.token << ' ' << e.seq << ' '
      << detail;
  return out.str();
}

std::vector<Event> read_history(const std::string& path) {
  std::ifstream in(path);
  std::vector<Event> events;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    Event e;
    if (fields >> e.t_us >> e.process >> e.op >> e.type >> e.token >> e.seq >> e.detail) events.push_back(e);
  }
  return events;
}

namespace {

using us = std::int64_t;
constexpr us never = std::numeric_limits<us>::max();

// One acquisition of one process, until its release (or loss, or death).
struct Hold {
  std::int64_t process = 0;
  std::uint64_t token = 0;
  us acquired = 0;
  us released = never;  // its release's invoke
  us lost = never;      // when it was told lost
  bool lost_on_release = false;  // its release said lock_lost
};

// Windows in which the nemesis had a process stopped or dead.
struct Outages {
  std::map<std::int64_t, std::vector<std::pair<us, us>>> by_process;
  bool any(std::int64_t process, us from, us to) const {
    auto it = by_process.find(process);
    if (it == by_process.end()) return false;
    for (auto [start, stop] : it->second)
      if (start <= to && from <= stop) return true;
    return false;
  }
};

std::string ms(us t) { return std::to_string(t / 1000) + "." + std::to_string((t % 1000) / 100) + " ms"; }

std::string describe(const Hold& h) {
  return "process " + std::to_string(h.process) + " (token " + std::to_string(h.token) + ")";
}

}  // namespace

CheckResult check_history(const std::vector<Event>& history, const CheckOptions& options) {
  CheckResult result;
  auto violation = [&](std::string what) {
    if (result.violations.size() < 50) result.violations.push_back(std::move(what));
  };

  // The nemesis's process faults: stop..resume, and kill..forever.
  Outages outages;
  std::map<std::int64_t, us> stopped_since;
  for (const auto& e : history) {
    if (e.op != "nemesis") continue;
    if (e.type == "start") ++result.faults[e.detail];
    if (e.process == 0) continue;
    if (e.detail == "kill-client" && e.type == "start") outages.by_process[e.process].push_back({e.t_us, never});
    if (e.detail == "pause-client" || e.detail == "partition") {
      // A partitioned client runs: its library must notice, so only a stop exempts.
      if (e.detail == "partition") continue;
      if (e.type == "start") stopped_since[e.process] = e.t_us;
      if (e.type == "stop" && stopped_since.contains(e.process))
        outages.by_process[e.process].push_back({stopped_since[e.process], e.t_us});
    }
  }
  for (auto [process, since] : stopped_since)
    if (auto& w = outages.by_process[process]; w.empty() || w.back().first != since) w.push_back({since, never});

  // The windows in which the store may grant twice by design: a fault of
  // double_grant_faults, and the grace after it.
  Outages double_grant_windows;  // (one "process": 0)
  std::map<std::string, us> fault_since;
  for (const auto& e : history) {
    if (e.op != "nemesis" || std::find(options.double_grant_faults.begin(), options.double_grant_faults.end(),
                                       e.detail) == options.double_grant_faults.end())
      continue;
    if (e.type == "start") fault_since[e.detail] = e.t_us;
    if (e.type == "stop" && fault_since.contains(e.detail))
      double_grant_windows.by_process[0].push_back(
          {fault_since[e.detail], e.t_us + options.double_grant_grace.count() * 1000});
  }
  auto may_double_grant = [&](us t) { return double_grant_windows.any(0, t, t); };

  // Holds, and the writes each made.
  std::vector<Hold> holds;
  std::map<std::int64_t, std::size_t> current;  // process → index in holds
  std::map<std::int64_t, us> invoked;           // process → its pending call's invoke
  std::map<std::int64_t, std::size_t> releasing;  // process → the hold its pending release ends
  struct Write {
    std::uint64_t seq;
    us t;
    std::size_t hold;
  };
  std::vector<Write> accepted;
  std::optional<us> final_invoke, final_done;
  bool final_ok = false;

  auto check_bound = [&](const Event& e, std::chrono::milliseconds bound, const char* what) {
    auto it = invoked.find(e.process);
    if (it == invoked.end()) return;
    const us took = e.t_us - it->second;
    if (bound.count() > 0 && took > bound.count() * 1000 && !outages.any(e.process, it->second, e.t_us))
      violation(std::string(what) + " by process " + std::to_string(e.process) + " took " + ms(took) +
                " (bound " + std::to_string(bound.count()) + " ms)");
    invoked.erase(it);
  };

  for (const auto& e : history) {
    if (e.op == "acquire") {
      if (e.type == "invoke") {
        ++result.acquires;
        invoked[e.process] = e.t_us;
        continue;
      }
      check_bound(e, options.acquire_bound, "an acquire");
      if (e.type == "ok") {
        ++result.acquired;
        current[e.process] = holds.size();
        holds.push_back({e.process, e.token, e.t_us});
      }
    } else if (e.op == "write") {
      auto it = current.find(e.process);
      if (it == current.end()) {
        violation("process " + std::to_string(e.process) + " wrote without holding the lock");
        continue;
      }
      const Hold& h = holds[it->second];
      if (e.type == "ok") {
        ++result.writes_accepted;
        accepted.push_back({e.seq, e.t_us, it->second});
      } else {
        ++result.writes_rejected;
        if (h.lost > e.t_us && !outages.any(e.process, h.acquired, e.t_us)) {
          if (may_double_grant(e.t_us))
            ++result.double_grants;
          else
            violation("the resource refused a write of " + describe(h) +
                      ", which was never told its lock was lost (another held it)");
        }
      }
    } else if (e.op == "lost") {
      ++result.lost;
      if (auto it = current.find(e.process); it != current.end())
        holds[it->second].lost = std::min(holds[it->second].lost, e.t_us);
      else if (auto r = releasing.find(e.process); r != releasing.end())
        holds[r->second].lost_on_release = true;
    } else if (e.op == "release") {
      if (e.type == "invoke") {
        if (auto it = current.find(e.process); it != current.end()) {
          holds[it->second].released = e.t_us;
          releasing[e.process] = it->second;
          current.erase(it);
        }
        invoked[e.process] = e.t_us;
        continue;
      }
      if (e.type == "fail") ++result.release_failed;
      if (auto r = releasing.find(e.process); r != releasing.end() && e.detail == "lock_lost")
        holds[r->second].lost_on_release = true;
      check_bound(e, options.release_bound, "a release");
    } else if (e.op == "final") {
      if (e.type == "invoke") {
        final_invoke = e.t_us;
      } else {
        final_done = e.t_us;
        final_ok = e.type == "ok";
      }
    }
  }

  // Exclusion, tokens and loss, in the resource's order of writes.
  std::sort(accepted.begin(), accepted.end(), [](const Write& a, const Write& b) { return a.seq < b.seq; });
  std::vector<bool> closed(holds.size(), false);
  for (std::size_t i = 1; i < accepted.size(); ++i) {
    const std::size_t from = accepted[i - 1].hold, to = accepted[i].hold;
    if (from == to) continue;
    const Hold& a = holds[from];
    const Hold& b = holds[to];
    // The same grant again: a release that failed left the store's entry,
    // and the process's next acquisition found it (same token, nobody between).
    if (a.process == b.process && a.token == b.token && a.token != 0) continue;
    closed[from] = true;
    if (closed[to])
      violation("exclusion: " + describe(b) + " wrote again after " + describe(a) +
                " had written: two holders at once");
    if (b.token <= a.token)
      violation("tokens: " + describe(b) + " wrote after " + describe(a) + ": its token is not greater");
    const us overtaken = accepted[i].t;
    const bool let_go = a.released <= overtaken || a.lost <= overtaken + options.lost_slack.count() * 1000;
    const bool excused = outages.any(a.process, a.acquired, overtaken);
    if (!let_go && !closed[to] && !excused && may_double_grant(overtaken)) {
      ++result.double_grants;
      if (a.lost == never && !a.lost_on_release && !outages.any(a.process, a.acquired, never))
        violation("lost: " + describe(b) + " wrote while " + describe(a) +
                  " still held the lock (a double grant of the topology), and that holder was never told lost");
    } else if (!let_go && !closed[to] && !excused)
      violation("lost: " + describe(b) + " wrote while " + describe(a) + " still believed it held the lock (" +
                (a.lost == never ? std::string("never told lost") : "told lost " + ms(a.lost - overtaken) + " later") +
                ")");
  }
  for (std::size_t i = 1; i < accepted.size(); ++i)
    result.longest_unavailable_us = std::max(result.longest_unavailable_us, accepted[i].t - accepted[i - 1].t);

  if (options.final_bound.count() > 0) {
    if (!final_invoke || !final_done)
      violation("leak: no final acquisition after the run");
    else if (!final_ok)
      violation("leak: the lock could not be acquired after the run");
    else if (*final_done - *final_invoke > options.final_bound.count() * 1000)
      violation("leak: the final acquisition took " + ms(*final_done - *final_invoke) + " (bound " +
                std::to_string(options.final_bound.count()) + " ms)");
  }
  return result;
}

}  // namespace dlock::test
