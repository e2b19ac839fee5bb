// cas_counters.h — Counter and Latch on a store that keeps a count in one
// cell it can read with a version and write only while that version holds
// (a compare-and-set): the encoding and the read-check-write loops, the same
// on every such store, written once. A store supplies the two remote steps
// (CountCells).
//
// Encoding: a big-endian signed integer, 4 bytes (Apache Curator's
// SharedCount) or 8 bytes (its DistributedAtomicLong); a cell keeps the
// width it was created with, and empty data reads as 0. A write that finds
// the cell changed since it was read reads again, until the call's deadline
// (then errc::unavailable: others kept writing first).
#pragma once

#include "core/counter_driver.h"
#include "core/driver.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dlock::detail {

// A count cell as read: its value, version (nullopt: no cell) and width in
// bytes (4 or 8; 0 for no data).
struct CountCell {
  std::int64_t value = 0;
  std::optional<std::int64_t> version;
  int width = 0;
};

// The bytes of `value` in `seen`'s width, or `missing`'s if it has none;
// invalid_argument if it does not fit in 4 bytes where that is the width
// (`what` names the value in the message).
Result<std::string> encode_count(std::int64_t value, const CountCell& seen, CounterWidth missing,
                                 std::string_view what);
// The count in a cell's data; invalid_argument naming `where` if it is not one.
Result<CountCell> decode_count(std::string_view data, std::string_view where);

// The remote steps of one store.
class CountCells {
 public:
  virtual ~CountCells() = default;
  // The cell of `name` (no version: there is none).
  virtual Result<CountCell> read_cell(const std::string& name, steady::time_point deadline,
                                      std::string_view step) = 0;
  // Writes `bytes` if the cell is still as `seen` (absent: creates it).
  // true: written; false: someone changed it first (read again).
  virtual Result<bool> write_cell(const std::string& name, const CountCell& seen, const std::string& bytes,
                                  steady::time_point deadline, std::string_view step) = 0;
};

// A compare-and-set loop ran out of time: others kept writing first.
Status contended(std::string_view step);

// Counter on such a store.
class CasCounters final : public CounterDriver {
 public:
  explicit CasCounters(CountCells& cells) : cells_(cells) {}
  Result<std::int64_t> load(const std::string& name, steady::time_point deadline) override;
  Status store(const std::string& name, std::int64_t value, CounterWidth width,
               steady::time_point deadline) override;
  Result<std::int64_t> fetch_add(const std::string& name, std::int64_t delta, CounterWidth width,
                                 steady::time_point deadline) override;
  Result<bool> compare_exchange(const std::string& name, std::int64_t& expected, std::int64_t desired,
                                CounterWidth width, steady::time_point deadline) override;

 private:
  CountCells& cells_;
};

// A Latch's cell (4 bytes): read, creating it with `initial` if it is
// absent; `read` is the store's read (which may also arm a watch).
template <class Read>
Result<CountCell> read_latch(CountCells& cells, const std::string& name, std::int64_t initial,
                             steady::time_point deadline, std::string_view step, Read&& read);
// Latch count_down: subtracts n, never below 0, creating the latch with
// `initial` if it is absent; the count after.
Result<std::int64_t> count_down_latch(CountCells& cells, const std::string& name, std::int64_t initial,
                                      std::int64_t n, steady::time_point deadline);

template <class Read>
Result<CountCell> read_latch(CountCells& cells, const std::string& name, std::int64_t initial,
                             steady::time_point deadline, std::string_view step, Read&& read) {
  // Refused even when the latch exists (and this count would go unused):
  // the same call must not succeed or fail depending on who came first.
  auto initial_bytes = encode_count(initial, CountCell{}, CounterWidth::int32, "latch count");
  if (!initial_bytes) return initial_bytes.status();
  while (steady::now() < deadline) {
    Result<CountCell> cell = read();
    if (!cell || cell->version) return cell;
    // Not there yet: we are the first, our count is its count. Then read
    // again (whoever created it, a watch must see the cell).
    auto made = cells.write_cell(name, *cell, *initial_bytes, deadline, "creating latch '" + name + "'");
    if (!made) return made.status();
  }
  return contended(step);
}

}  // namespace dlock::detail
