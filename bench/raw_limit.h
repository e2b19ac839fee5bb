// raw_limit.h — what the raw-limit tools (zk_raw.cpp, pg_raw.cpp) share: their common arguments,
// a loop bounded in time and count that times each unit, and nearest-rank percentiles of the times.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <functional>
#include <string>
#include <vector>

namespace dlock_bench {

using clock_type = std::chrono::steady_clock;

// Nearest-rank percentile q of `samples_s` (seconds; sorted here), in microseconds rounded to 0.1;
// 0 if there are none.
inline double percentile_us(std::vector<double>& samples_s, double q) {
  if (samples_s.empty()) return 0;
  std::sort(samples_s.begin(), samples_s.end());
  auto i = static_cast<std::size_t>(std::max(0.0, std::ceil(q * static_cast<double>(samples_s.size())) - 1));
  return std::round(samples_s[std::min(i, samples_s.size() - 1)] * 1e7) / 10;
}

// What every raw-limit tool is told: [--seconds S] [--max-ops N] TARGET.
struct RawArgs {
  std::string target;  // the server, as the tool takes it
  double seconds = 3;
  long max_ops = 1'000'000;
};

// Reads RawArgs, and a tool's own `--NAME VALUE` options through `own(name, value)` (false: not
// one of them; it may throw std::exception for a bad value). Returns what is wrong, or "".
inline std::string parse_raw_args(int argc, char** argv, RawArgs& args,
                                  const std::function<bool(const std::string&, const char*)>& own = nullptr) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    try {
      if (a == "--seconds" && has_value) {
        args.seconds = std::stod(argv[++i]);
      } else if (a == "--max-ops" && has_value) {
        args.max_ops = std::stol(argv[++i]);
      } else if (a.starts_with("--") && has_value && own && own(a, argv[i + 1])) {
        ++i;
      } else if (!a.starts_with("--") && args.target.empty()) {
        args.target = a;
      } else {
        return "unexpected argument " + a;
      }
    } catch (const std::exception&) {
      return "not a number after " + a;
    }
  }
  if (!(args.seconds > 0 && args.seconds <= 600) || args.max_ops < 1)
    return "--seconds must be in (0, 600] and --max-ops >= 1";
  return "";
}

struct LoopResult {
  long ops = 0;
  double seconds = 0;
  std::vector<double> latencies;  // seconds per unit
};

// Runs `unit()` until `seconds` have passed or `max_ops` units are done (a unit started before the
// deadline finishes); errors are the unit's to throw.
template <class Unit>
LoopResult timed_loop(double seconds, long max_ops, Unit&& unit) {
  LoopResult r;
  const auto start = clock_type::now();
  const auto deadline = start + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(seconds));
  while (r.ops < max_ops) {
    const auto t0 = clock_type::now();
    if (t0 >= deadline) break;
    unit();
    r.latencies.push_back(std::chrono::duration<double>(clock_type::now() - t0).count());
    ++r.ops;
  }
  r.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  return r;
}

}  // namespace dlock_bench
