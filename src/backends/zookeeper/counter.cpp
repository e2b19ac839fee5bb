#include "backends/zookeeper/counter.h"

#include "backends/zookeeper/errors.h"
#include "core/count_value.h"

#include <limits>

namespace dlock::detail::zookeeper {
namespace {

constexpr int persistent = 0;

}  // namespace

Status contended(std::string_view step) {
  return Status(errc::unavailable, "zookeeper: " + std::string(step) +
                                       ": the value kept changing under us until ClientOptions::op_timeout "
                                       "(heavy contention); retry");
}

Result<std::string> encode_count(std::int64_t value, const CountNode& seen, CounterWidth missing,
                                 std::string_view what) {
  const int width = seen.width ? seen.width : (missing == CounterWidth::int64 ? 8 : 4);
  if (Status fits = check_count_fits(value, width, what); !fits) return fits;
  auto bits = static_cast<std::uint64_t>(value);
  std::string bytes(static_cast<std::size_t>(width), '\0');
  for (int i = width - 1; i >= 0; --i, bits >>= 8) bytes[static_cast<std::size_t>(i)] = static_cast<char>(bits & 0xff);
  return bytes;
}

Result<CountNode> decode_count(const std::string& data, std::string_view path) {
  if (data.empty()) return CountNode{};
  if (data.size() != 4 && data.size() != 8)
    return Status(errc::invalid_argument,
                  "zookeeper: " + std::string(path) + " holds " + std::to_string(data.size()) +
                      " bytes, not a count (a 4-byte big-endian int as Curator's SharedCount, or an 8-byte long as "
                      "its DistributedAtomicLong)");
  std::uint64_t bits = 0;
  for (char c : data) bits = (bits << 8) | static_cast<unsigned char>(c);
  CountNode out;
  out.width = static_cast<int>(data.size());
  out.value = out.width == 4 ? std::int64_t{static_cast<std::int32_t>(bits)} : static_cast<std::int64_t>(bits);
  return out;
}

Result<CountNode> read_count(Session& session, const std::string& path, steady::time_point deadline,
                             std::string_view step, const std::shared_ptr<Signal>& watch) {
  auto call = watch ? session.watch(path, watch, deadline) : session.get(path, deadline);
  if (!call->wait_until(deadline)) return no_reply(step);
  if (call->rc == ZNONODE) return CountNode{};
  if (call->rc != ZOK) return to_status(call->rc, step, path);
  auto node = decode_count(call->data, path);
  if (!node) return node.status();
  node->version = call->stat.version;
  return node;
}

Result<bool> write_count(Session& session, const std::string& path, const CountNode& seen, const std::string& bytes,
                         steady::time_point deadline, std::string_view step) {
  if (seen.version) {
    auto set = session.set(path, bytes, *seen.version, deadline);
    if (!set->wait_until(deadline)) return no_reply(step);
    if (set->rc == ZBADVERSION || set->rc == ZNONODE) return false;  // changed or deleted since we read it
    if (Status s = to_status(set->rc, step, path); !s) return s;
    return true;
  }
  auto create = session.create_with_parents(path, persistent, deadline, step, bytes);
  if (!create) return create.status();
  const CallPtr& made = *create;
  if (!made->wait_until(deadline)) return no_reply(step);
  if (made->rc == ZNODEEXISTS) return false;  // someone created it first
  if (Status s = to_status(made->rc, step, path); !s) return s;
  return true;
}

Result<std::int64_t> Counters::load(const std::string& name, steady::time_point deadline) {
  const std::string path = lock_path(session_.config(), name);
  auto node = read_count(session_, path, deadline, "reading counter '" + name + "'");
  if (!node) return node.status();
  return node->value;
}

Status Counters::store(const std::string& name, std::int64_t value, CounterWidth width,
                       steady::time_point deadline) {
  const std::string step = "storing counter '" + name + "'";
  const std::string path = lock_path(session_.config(), name);
  while (steady::now() < deadline) {
    // Read first: the value is written in the width the counter has.
    auto node = read_count(session_, path, deadline, step);
    if (!node) return node.status();
    auto bytes = encode_count(value, *node, width, "store: value");
    if (!bytes) return bytes.status();
    auto written = write_count(session_, path, *node, *bytes, deadline, step);
    if (!written) return written.status();
    if (*written) return {};
  }
  return contended(step);
}

Result<std::int64_t> Counters::fetch_add(const std::string& name, std::int64_t delta, CounterWidth width,
                                         steady::time_point deadline) {
  const std::string step = "adding to counter '" + name + "'";
  const std::string path = lock_path(session_.config(), name);
  while (steady::now() < deadline) {
    auto node = read_count(session_, path, deadline, step);
    if (!node) return node.status();
    auto sum = count_sum(name, node->value, delta);
    if (!sum) return sum.status();
    auto bytes = encode_count(*sum, *node, width, "fetch_add: the result");
    if (!bytes) return bytes.status();
    auto written = write_count(session_, path, *node, *bytes, deadline, step);
    if (!written) return written.status();
    if (*written) return node->value;
  }
  return contended(step);
}

Result<bool> Counters::compare_exchange(const std::string& name, std::int64_t& expected, std::int64_t desired,
                                        CounterWidth width, steady::time_point deadline) {
  const std::string step = "compare_exchange on counter '" + name + "'";
  const std::string path = lock_path(session_.config(), name);
  while (steady::now() < deadline) {
    auto node = read_count(session_, path, deadline, step);
    if (!node) return node.status();
    if (node->value != expected) {
      expected = node->value;
      return false;
    }
    auto bytes = encode_count(desired, *node, width, "compare_exchange: desired");
    if (!bytes) return bytes.status();
    // A lost race is not a failure yet: the value may still be `expected`.
    auto written = write_count(session_, path, *node, *bytes, deadline, step);
    if (!written) return written.status();
    if (*written) return true;
  }
  return contended(step);
}

}  // namespace dlock::detail::zookeeper
