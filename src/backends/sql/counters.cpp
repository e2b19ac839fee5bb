// counters.cpp — Counter and Latch on the lock table recipe (counters.h).
#include "backends/sql/counters.h"

#include "core/count_value.h"

#include <algorithm>
#include <functional>

namespace dlock::detail::sql {
namespace {

class Counters final : public CounterDriver {
 public:
  explicit Counters(CountRows& rows) : rows_(rows) {}

  Result<std::int64_t> load(const std::string& name, steady::time_point deadline) override {
    const Call calls[] = {{Stmt::read_count, {name, kind_counter}}};
    auto out = rows_.run("reading counter '" + name + "'", deadline, calls);
    if (!out) return out.status();
    return (*out)[0].empty() ? 0 : (*out)[0].integer(0, 0);
  }

  Status store(const std::string& name, std::int64_t value, CounterWidth width,
               steady::time_point deadline) override {
    return update_counter("writing counter '" + name + "'", name, width, deadline,
                          [&](std::int64_t, int bytes) -> Result<std::int64_t> {
                            if (Status s = check_count_fits(value, bytes, "store: value"); !s) return s;
                            return value;
                          });
  }

  Result<std::int64_t> fetch_add(const std::string& name, std::int64_t delta, CounterWidth width,
                                 steady::time_point deadline) override {
    std::int64_t before = 0;
    auto done = update_counter("adding to counter '" + name + "'", name, width, deadline,
                               [&](std::int64_t now, int bytes) -> Result<std::int64_t> {
                                 before = now;
                                 auto sum = count_sum(name, now, delta);
                                 if (!sum) return sum.status();
                                 if (Status s = check_count_fits(*sum, bytes, "fetch_add: the result"); !s) return s;
                                 return *sum;
                               });
    if (!done) return done;
    return before;
  }

  Result<bool> compare_exchange(const std::string& name, std::int64_t& expected, std::int64_t desired,
                                CounterWidth width, steady::time_point deadline) override {
    bool swapped = false;
    auto done = update_counter("compare-exchanging counter '" + name + "'", name, width, deadline,
                               [&](std::int64_t now, int bytes) -> Result<std::int64_t> {
                                 if (now != expected) {
                                   expected = now;
                                   return now;
                                 }
                                 if (Status s = check_count_fits(desired, bytes, "compare_exchange: desired"); !s)
                                   return s;
                                 swapped = true;
                                 return desired;
                               });
    if (!done) return done;
    return swapped;
  }

 private:
  // A counter's read-modify-write: `next(value, width)` is the new value,
  // or why not.
  Status update_counter(const std::string& step, const std::string& name, CounterWidth width,
                        steady::time_point deadline,
                        const std::function<Result<std::int64_t>(std::int64_t value, int width)>& next) {
    const std::int64_t bytes = width == CounterWidth::int64 ? 8 : 4;
    return rows_.under_count(step, name, kind_counter, 0, bytes, deadline,
                       [&](std::int64_t now, int stored_bytes, std::vector<Call>& writes) -> Status {
                         auto value = next(now, stored_bytes);
                         if (!value) return value.status();
                         if (*value != now) writes.push_back({Stmt::set_count, {name, kind_counter, *value}});
                         return {};
                       });
  }

  CountRows& rows_;
};

class Latches final : public LatchDriver {
 public:
  explicit Latches(CountRows& rows) : rows_(rows) {}

  Result<LatchRead> read(const std::string& name, std::int64_t initial, bool watch,
                         steady::time_point deadline) override {
    if (Status s = check_count_fits(initial, 4, "latch count"); !s) return s;
    LatchRead r;
    auto seen = rows_.under_count("reading latch '" + name + "'", name, kind_latch, initial, 4, deadline,
                            [&](std::int64_t now, int, std::vector<Call>& writes) -> Status {
                              r.remaining = now;
                              if (now > 0 && watch) r.change = rows_.watcher(name, kind_latch, writes);
                              return {};
                            });
    if (!seen) return seen;
    return r;
  }

  Result<std::int64_t> count_down(const std::string& name, std::int64_t initial, std::int64_t n,
                                  steady::time_point deadline) override {
    if (Status s = check_count_fits(initial, 4, "latch count"); !s) return s;
    std::int64_t after = 0;
    auto done = rows_.under_count("counting down latch '" + name + "'", name, kind_latch, initial, 4, deadline,
                            [&](std::int64_t now, int, std::vector<Call>& writes) -> Status {
                              after = std::max<std::int64_t>(0, now - n);
                              if (after == now) return {};
                              writes.push_back({Stmt::set_count, {name, kind_latch, after}});
                              if (after == 0) CountRows::wake_watchers(name, kind_latch, writes);
                              return {};
                            });
    if (!done) return done;
    return after;
  }

 private:
  CountRows& rows_;
};

}  // namespace

std::unique_ptr<CounterDriver> make_counters(CountRows& rows) { return std::make_unique<Counters>(rows); }
std::unique_ptr<LatchDriver> make_latches(CountRows& rows) { return std::make_unique<Latches>(rows); }

}  // namespace dlock::detail::sql
