// history.h — what the processes of a nemesis run did, one event per line,
// and the checker that reads it.
//
// Workers (and the harness, for its faults and its final check) append
// events to one file; each line is written with one write() on an O_APPEND
// descriptor, so lines of several processes never mix. Times are
// CLOCK_MONOTONIC (steady_clock) in µs, the same clock in every process of
// the machine, network namespaces included.
//
//   <t_us> <process> <op> <type> <token> <seq> <detail>
//
//   op       type                         meaning
//   acquire  invoke | ok | fail           a lock call; ok carries the token,
//                                         fail the error (detail)
//   write    ok | fail                    a fenced write, accepted (ok) or
//                                         refused by the resource; seq is the
//                                         resource's order of writes
//   lost     info                         the holder was told its lock is lost
//   release  invoke | ok | fail           an unlock; fail carries the error
//   nemesis  start | stop                 a fault on `process` (0: the store
//                                         or the whole run); detail its kind
//   final    invoke | ok | fail           the harness's acquisition after the
//                                         run (no hold may have leaked)
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dlock::test {

struct Event {
  std::int64_t t_us = 0;
  std::int64_t process = 0;
  std::string op;
  std::string type;
  std::uint64_t token = 0;
  std::uint64_t seq = 0;
  std::string detail = "-";
};

// CLOCK_MONOTONIC now, in µs.
std::int64_t monotonic_us();

// Appends events to a history file (created if missing).
class HistoryWriter {
 public:
  explicit HistoryWriter(const std::string& path);
  ~HistoryWriter();
  HistoryWriter(const HistoryWriter&) = delete;
  HistoryWriter& operator=(const HistoryWriter&) = delete;
  // Stamps e.t_us with now if it is 0. Thread-safe (one write per event).
  void append(Event e);

 private:
  int fd_ = -1;
};

std::string format_event(const Event& e);
// Every well-formed line of the file (a line cut short by a killed writer
// is skipped), in file order.
std::vector<Event> read_history(const std::string& path);

struct CheckOptions {
  // An acquire may take its wait plus one store call; a release one or two
  // store calls. Beyond these (plus slack) a call is "unbounded".
  std::chrono::milliseconds acquire_bound{0};
  std::chrono::milliseconds release_bound{0};
  // The final acquisition must succeed within this (the lease or session
  // timeout plus a call). 0: no final check is required.
  std::chrono::milliseconds final_bound{0};
  // How late a holder may notice its loss after the next holder's first
  // write (it polls lost() between steps of its work).
  std::chrono::milliseconds lost_slack{0};
  // Fault kinds (nemesis details) under which the store may grant the lock
  // twice by design (a replica promoted without the last grant), and how
  // long after such a fault that may still show. Empty: none may.
  std::vector<std::string> double_grant_faults = {};
  std::chrono::milliseconds double_grant_grace{0};
};

struct CheckResult {
  std::vector<std::string> violations;  // empty: the history is correct
  // Figures of the run.
  std::uint64_t acquires = 0, acquired = 0, writes_accepted = 0, writes_rejected = 0, lost = 0,
                release_failed = 0;
  std::map<std::string, std::uint64_t> faults;  // by kind
  std::int64_t longest_unavailable_us = 0;      // the longest time between two accepted writes
  // Overtakings and refused writes excused as double grants (double_grant_faults).
  std::uint64_t double_grants = 0;
  bool ok() const { return violations.empty(); }
};

// Checks the history:
//   exclusion   the accepted writes of two holds (process, token) never
//               interleave in the resource's order: a hold's writes form one
//               run (a process granted the same token again, with no other
//               holder's write between, holds the same grant: a release
//               that failed left the store's entry);
//   tokens      each hold's token is greater than the one before it;
//   lost        a hold overtaken by the next one (whose first accepted write
//               came before its own release) was told `lost` no later than
//               that write (+ lost_slack), unless the nemesis stopped or
//               killed its process meanwhile; and no write of a holder that
//               was never told lost is refused (it believed it held a lock
//               someone else had);
//   bounds      no acquire or release took longer than its bound, unless
//               the nemesis stopped its process meanwhile;
//   leak        the final acquisition succeeded within final_bound.
// Within a fault of double_grant_faults (+ grace), a `lost` finding is a
// double grant (counted, not a violation) as long as the overtaken holder
// was told lost by the end of its hold (a `lost`, or a release that said
// lock_lost) or the nemesis stopped or killed it; a refused write there is
// counted too. exclusion, tokens, bounds and leak are checked as anywhere.
CheckResult check_history(const std::vector<Event>& history, const CheckOptions& options);

}  // namespace dlock::test
