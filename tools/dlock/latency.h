// latency.h — what the demo and the benchmarks measure: latency histograms
// that live in shared memory, percentiles, fairness, and a little JSON.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace dlock::cli {

// A log-linear histogram of durations in nanoseconds: exact below 16 ns,
// then 16 buckets per power of two, so a reported percentile (the middle of
// its bucket) is within about 3% of the true value. Plain data of fixed
// size, so it can sit in a MAP_SHARED region and be filled by one thread of
// a child process and read by the parent after the child exited; all zero
// bytes is an empty histogram.
class LatencyHistogram {
 public:
  void add(std::chrono::nanoseconds d) noexcept;
  void merge(const LatencyHistogram& other) noexcept;
  std::uint64_t count() const noexcept { return total_; }
  // The q-quantile (0 < q <= 1), e.g. 0.99; zero if empty.
  std::chrono::nanoseconds percentile(double q) const noexcept;

 private:
  static constexpr int sub_bits = 4;
  static constexpr std::size_t bucket_count = 1024;
  static std::size_t index_of(std::uint64_t ns) noexcept;
  static std::uint64_t lower_bound_of(std::size_t index) noexcept;

  std::uint64_t total_;
  std::uint64_t buckets_[bucket_count];
};
static_assert(std::is_trivially_copyable_v<LatencyHistogram>);

// Microseconds as a double, for reports.
inline double to_us(std::chrono::nanoseconds d) { return static_cast<double>(d.count()) / 1e3; }

// Jain's fairness index (Σx)² / (n·Σx²): 1 when every share is equal,
// 1/n when one participant got everything. 1 for an empty or all-zero list.
double jain_index(std::span<const std::uint64_t> shares);

// A JSON number: `decimals` digits after the point; null if not finite.
std::string json_number(double v, int decimals = 1);

// Builds one JSON object field by field, in order.
class JsonObject {
 public:
  JsonObject& raw(std::string_view key, std::string_view json);
  JsonObject& str(std::string_view key, std::string_view value);
  JsonObject& num(std::string_view key, double value, int decimals = 1);
  JsonObject& integer(std::string_view key, std::int64_t value);
  JsonObject& uinteger(std::string_view key, std::uint64_t value);
  JsonObject& boolean(std::string_view key, bool value);
  std::string text() const { return body_ + "}"; }

 private:
  std::string body_ = "{";
};

// A JSON array of already-encoded values.
std::string json_array(const std::vector<std::string>& items);

}  // namespace dlock::cli
