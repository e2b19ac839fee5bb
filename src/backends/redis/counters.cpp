// counters.cpp — Counter and Latch on redis:// (counters.h).
#include "backends/redis/counters.h"

#include "backends/redis/errors.h"
#include "core/count_value.h"

namespace dlock::detail::redis {

namespace {

const char* width_code(CounterWidth width) { return width == CounterWidth::int64 ? "8" : "4"; }

// A refusal by the script (it checks the stored width): core's range rule
// says why, in the same words as on every store.
Status refused(std::int64_t value, std::string_view what, const std::string& step) {
  Status why = check_count_fits(value, 4, what);
  return why.ok() ? unexpected(step) : why;
}

class Counters final : public CounterDriver {
 public:
  explicit Counters(const Store& store) : store_(store) {}

  Result<std::int64_t> load(const std::string& name, steady::time_point deadline) override {
    const std::string key = store_.base(name) + "counter";
    const std::string_view words[] = {"HGET", key, "value"};
    auto reply = store_.pool.command(words, deadline, "reading counter '" + name + "'", key);
    if (!reply) return reply.status();
    if ((*reply)->type == REDIS_REPLY_NIL) return std::int64_t{0};
    auto value = signed_number(reply->get());
    if (!value) return unexpected("reading counter '" + name + "'");
    return *value;
  }

  Status store(const std::string& name, std::int64_t value, CounterWidth width, steady::time_point deadline) override {
    const std::string step = "storing counter '" + name + "'";
    const std::string v = std::to_string(value);
    const std::string_view args[] = {v, width_code(width)};
    auto r = run(Script::counter_store, name, args, deadline, step);
    if (!r) return r.status();
    if (integer(r->get()->element[0]) == -1) return refused(value, "store: value", step);
    return {};
  }

  Result<std::int64_t> fetch_add(const std::string& name, std::int64_t delta, CounterWidth width,
                                 steady::time_point deadline) override {
    const std::string step = "adding to counter '" + name + "'";
    const std::string d = std::to_string(delta);
    const std::string_view args[] = {d, width_code(width)};
    auto r = run(Script::counter_add, name, args, deadline, step);
    if (!r) return r.status();
    const redisReply* reply = r->get();
    switch (integer(reply->element[0])) {
      case 1:
        if (auto before = reply->elements == 2 ? signed_number(reply->element[1]) : std::nullopt) return *before;
        return unexpected(step);
      case -1: {
        auto before = reply->elements == 3 ? signed_number(reply->element[2]) : std::nullopt;
        if (!before) return unexpected(step);
        auto sum = count_sum(name, *before, delta);
        if (!sum) return sum.status();
        return refused(*sum, "fetch_add: the result", step);
      }
      default:
        return unexpected(step);
    }
  }

  Result<bool> compare_exchange(const std::string& name, std::int64_t& expected, std::int64_t desired,
                                CounterWidth width, steady::time_point deadline) override {
    const std::string step = "compare-exchanging counter '" + name + "'";
    const std::string e = std::to_string(expected), d = std::to_string(desired);
    const std::string_view args[] = {e, d, width_code(width)};
    auto r = run(Script::counter_cas, name, args, deadline, step);
    if (!r) return r.status();
    const redisReply* reply = r->get();
    switch (integer(reply->element[0])) {
      case 1:
        return true;
      case 0: {
        auto seen = reply->elements == 2 ? signed_number(reply->element[1]) : std::nullopt;
        if (!seen) return unexpected(step);
        expected = *seen;
        return false;
      }
      case -1:
        return refused(desired, "compare_exchange: desired", step);
      default:
        return unexpected(step);
    }
  }

 private:
  // The script's reply, checked to be a non-empty array.
  Result<Reply> run(Script script, const std::string& name, std::span<const std::string_view> args,
                    steady::time_point deadline, const std::string& step) {
    const std::string key = store_.base(name) + "counter";
    const std::string_view keys[] = {key};
    auto reply = store_.pool.eval(script, keys, args, deadline, step, key);
    if (!reply) return reply.status();
    if ((*reply)->type != REDIS_REPLY_ARRAY || (*reply)->elements < 1) return unexpected(step);
    return reply;
  }

  const Store& store_;
};

class Latches final : public LatchDriver {
 public:
  explicit Latches(const Store& store) : store_(store) {}

  Result<LatchRead> read(const std::string& name, std::int64_t initial, bool watch,
                         steady::time_point deadline) override {
    const std::string step = "reading latch '" + name + "'";
    WatchSlot slot(store_, watch, name, tag(name));
    const std::string i = std::to_string(initial), ttl = ms(watcher_ttl);
    const std::string_view args[] = {i, slot.entry(), ttl};
    auto count = run(Script::latch_read, name, args, deadline, step);
    if (!count) return count.status();
    LatchRead out;
    out.remaining = *count;
    if (*count > 0) out.change = slot.take();
    return out;
  }

  Result<std::int64_t> count_down(const std::string& name, std::int64_t initial, std::int64_t n,
                                  steady::time_point deadline) override {
    const std::string step = "counting down latch '" + name + "'";
    const std::string i = std::to_string(initial), minus = "-" + std::to_string(n), t = tag(name);
    const std::string_view args[] = {i, minus, store_.channel_prefix, t};
    return run(Script::latch_count_down, name, args, deadline, step);
  }

 private:
  static std::string tag(const std::string& name) { return "latch:" + name; }

  Result<std::int64_t> run(Script script, const std::string& name, std::span<const std::string_view> args,
                           steady::time_point deadline, const std::string& step) {
    const std::string base = store_.base(name);
    const std::string key = base + "latch", watchers = base + "latch:watchers";
    const std::string_view keys[] = {key, watchers};
    auto reply = store_.pool.eval(script, keys, args, deadline, step, key);
    if (!reply) return reply.status();
    auto count = signed_number(reply->get());
    if (!count) return unexpected(step);
    return *count;
  }

  const Store& store_;
};

}  // namespace

std::unique_ptr<CounterDriver> make_counters(const Store& store) { return std::make_unique<Counters>(store); }
std::unique_ptr<LatchDriver> make_latches(const Store& store) { return std::make_unique<Latches>(store); }

}  // namespace dlock::detail::redis
