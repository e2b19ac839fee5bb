#include "latency.h"

#include "commands.h"

#include <bit>
#include <cmath>
#include <cstdio>

namespace dlock::cli {

std::size_t LatencyHistogram::index_of(std::uint64_t ns) noexcept {
  constexpr std::uint64_t linear = 1u << sub_bits;
  if (ns < linear) return static_cast<std::size_t>(ns);
  const int exponent = std::bit_width(ns) - 1;  // >= sub_bits
  const std::uint64_t sub = (ns >> (exponent - sub_bits)) & (linear - 1);
  return static_cast<std::size_t>(exponent - sub_bits + 1) * linear + static_cast<std::size_t>(sub);
}

std::uint64_t LatencyHistogram::lower_bound_of(std::size_t index) noexcept {
  constexpr std::size_t linear = 1u << sub_bits;
  if (index < linear) return index;
  const int exponent = static_cast<int>(index / linear) + sub_bits - 1;
  const std::uint64_t sub = index % linear;
  return (linear + sub) << (exponent - sub_bits);
}

void LatencyHistogram::add(std::chrono::nanoseconds d) noexcept {
  const std::uint64_t ns = d.count() < 0 ? 0 : static_cast<std::uint64_t>(d.count());
  std::size_t i = index_of(ns);
  if (i >= bucket_count) i = bucket_count - 1;
  ++buckets_[i];
  ++total_;
}

void LatencyHistogram::merge(const LatencyHistogram& other) noexcept {
  for (std::size_t i = 0; i < bucket_count; ++i) buckets_[i] += other.buckets_[i];
  total_ += other.total_;
}

std::chrono::nanoseconds LatencyHistogram::percentile(double q) const noexcept {
  if (total_ == 0) return {};
  auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(total_)));
  if (rank < 1) rank = 1;
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < bucket_count; ++i) {
    seen += buckets_[i];
    if (seen >= rank) {
      const std::uint64_t lo = lower_bound_of(i);
      const std::uint64_t hi = i + 1 < bucket_count ? lower_bound_of(i + 1) : lo + 1;
      return std::chrono::nanoseconds(static_cast<std::int64_t>(lo + (hi - lo) / 2));
    }
  }
  return {};
}

double jain_index(std::span<const std::uint64_t> shares) {
  double sum = 0, squares = 0;
  for (auto x : shares) {
    sum += static_cast<double>(x);
    squares += static_cast<double>(x) * static_cast<double>(x);
  }
  if (shares.empty() || squares == 0) return 1.0;
  return sum * sum / (static_cast<double>(shares.size()) * squares);
}

std::string json_number(double v, int decimals) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

JsonObject& JsonObject::raw(std::string_view key, std::string_view json) {
  if (body_.size() > 1) body_ += ",";
  body_ += json_string(key);
  body_ += ":";
  body_ += json;
  return *this;
}

JsonObject& JsonObject::str(std::string_view key, std::string_view value) { return raw(key, json_string(value)); }
JsonObject& JsonObject::num(std::string_view key, double value, int decimals) {
  return raw(key, json_number(value, decimals));
}
JsonObject& JsonObject::integer(std::string_view key, std::int64_t value) { return raw(key, std::to_string(value)); }
JsonObject& JsonObject::uinteger(std::string_view key, std::uint64_t value) {
  return raw(key, std::to_string(value));
}
JsonObject& JsonObject::boolean(std::string_view key, bool value) { return raw(key, value ? "true" : "false"); }

std::string json_array(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += ",";
    out += items[i];
  }
  return out + "]";
}

}  // namespace dlock::cli
