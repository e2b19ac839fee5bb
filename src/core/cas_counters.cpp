#include "core/cas_counters.h"

#include "core/count_value.h"

#include <algorithm>

namespace dlock::detail {

Result<std::string> encode_count(std::int64_t value, const CountCell& seen, CounterWidth missing,
                                 std::string_view what) {
  const int width = seen.width ? seen.width : (missing == CounterWidth::int64 ? 8 : 4);
  if (Status fits = check_count_fits(value, width, what); !fits) return fits;
  auto bits = static_cast<std::uint64_t>(value);
  std::string bytes(static_cast<std::size_t>(width), '\0');
  for (int i = width - 1; i >= 0; --i, bits >>= 8) bytes[static_cast<std::size_t>(i)] = static_cast<char>(bits & 0xff);
  return bytes;
}

Result<CountCell> decode_count(std::string_view data, std::string_view where) {
  if (data.empty()) return CountCell{};
  if (data.size() != 4 && data.size() != 8)
    return Status(errc::invalid_argument,
                  std::string(where) + " holds " + std::to_string(data.size()) +
                      " bytes, not a count (a 4-byte big-endian int as Curator's SharedCount, or an 8-byte long as "
                      "its DistributedAtomicLong)");
  std::uint64_t bits = 0;
  for (char c : data) bits = (bits << 8) | static_cast<unsigned char>(c);
  CountCell out;
  out.width = static_cast<int>(data.size());
  out.value = out.width == 4 ? std::int64_t{static_cast<std::int32_t>(bits)} : static_cast<std::int64_t>(bits);
  return out;
}

Status contended(std::string_view step) {
  return Status(errc::unavailable, std::string(step) +
                                       ": the value kept changing under us until ClientOptions::op_timeout "
                                       "(heavy contention); retry");
}

Result<std::int64_t> CasCounters::load(const std::string& name, steady::time_point deadline) {
  auto cell = cells_.read_cell(name, deadline, "reading counter '" + name + "'");
  if (!cell) return cell.status();
  return cell->value;
}

Status CasCounters::store(const std::string& name, std::int64_t value, CounterWidth width,
                          steady::time_point deadline) {
  const std::string step = "storing counter '" + name + "'";
  while (steady::now() < deadline) {
    // Read first: the value is written in the width the counter has.
    auto cell = cells_.read_cell(name, deadline, step);
    if (!cell) return cell.status();
    auto bytes = encode_count(value, *cell, width, "store: value");
    if (!bytes) return bytes.status();
    auto written = cells_.write_cell(name, *cell, *bytes, deadline, step);
    if (!written) return written.status();
    if (*written) return {};
  }
  return contended(step);
}

Result<std::int64_t> CasCounters::fetch_add(const std::string& name, std::int64_t delta, CounterWidth width,
                                            steady::time_point deadline) {
  const std::string step = "adding to counter '" + name + "'";
  while (steady::now() < deadline) {
    auto cell = cells_.read_cell(name, deadline, step);
    if (!cell) return cell.status();
    auto sum = count_sum(name, cell->value, delta);
    if (!sum) return sum.status();
    auto bytes = encode_count(*sum, *cell, width, "fetch_add: the result");
    if (!bytes) return bytes.status();
    auto written = cells_.write_cell(name, *cell, *bytes, deadline, step);
    if (!written) return written.status();
    if (*written) return cell->value;
  }
  return contended(step);
}

Result<bool> CasCounters::compare_exchange(const std::string& name, std::int64_t& expected, std::int64_t desired,
                                           CounterWidth width, steady::time_point deadline) {
  const std::string step = "compare_exchange on counter '" + name + "'";
  while (steady::now() < deadline) {
    auto cell = cells_.read_cell(name, deadline, step);
    if (!cell) return cell.status();
    if (cell->value != expected) {
      expected = cell->value;
      return false;
    }
    auto bytes = encode_count(desired, *cell, width, "compare_exchange: desired");
    if (!bytes) return bytes.status();
    // A lost race is not a failure yet: the value may still be `expected`.
    auto written = cells_.write_cell(name, *cell, *bytes, deadline, step);
    if (!written) return written.status();
    if (*written) return true;
  }
  return contended(step);
}

Result<std::int64_t> count_down_latch(CountCells& cells, const std::string& name, std::int64_t initial,
                                      std::int64_t n, steady::time_point deadline) {
  const std::string step = "counting down latch '" + name + "'";
  while (steady::now() < deadline) {
    auto cell = read_latch(cells, name, initial, deadline, step,
                           [&] { return cells.read_cell(name, deadline, step); });
    if (!cell) return cell.status();
    const std::int64_t after = std::max<std::int64_t>(0, cell->value - n);
    if (after == cell->value) return after;  // already 0, or n == 0: nothing to write
    auto after_bytes = encode_count(after, *cell, CounterWidth::int32, "latch count");
    if (!after_bytes) return after_bytes.status();
    auto written = cells.write_cell(name, *cell, *after_bytes, deadline, step);
    if (!written) return written.status();
    if (*written) return after;
  }
  return contended(step);
}

}  // namespace dlock::detail
