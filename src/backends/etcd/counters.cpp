#include "backends/etcd/counters.h"

#include "backends/etcd/keys.h"

namespace dlock::detail::etcd {

Result<CountCell> CountKeys::read_cell(const std::string& name, steady::time_point deadline, std::string_view step) {
  auto read = session_.range(one_key(key(name)), deadline, step);
  if (!read) return read.status();
  if (read->kvs_size() == 0) return CountCell{};
  auto cell = decode_count(read->kvs(0).value(), "etcd: key '" + key(name) + "'");
  if (!cell) return cell.status();
  cell->version = read->kvs(0).mod_revision();
  return cell;
}

Result<bool> CountKeys::write_cell(const std::string& name, const CountCell& seen, const std::string& bytes,
                                   steady::time_point deadline, std::string_view step) {
  // Unchanged since read: the same mod revision (0 for a key still absent).
  pb::TxnRequest t;
  auto* same = t.add_compare();
  same->set_result(pb::Compare::EQUAL);
  same->set_target(pb::Compare::MOD);
  same->set_key(key(name));
  same->set_mod_revision(seen.version.value_or(0));
  auto* put = t.add_success()->mutable_request_put();
  put->set_key(key(name));
  put->set_value(bytes);
  auto written = session_.txn(t, deadline, step);
  if (!written) return written.status();
  return written->succeeded();
}

Latches::Latches(Session& session) : session_(session), keys_(session, kind_root(session.config(), "latch")) {}

Result<LatchRead> Latches::read(const std::string& name, std::int64_t initial, bool watch,
                                steady::time_point deadline) {
  const std::string step = "reading latch '" + name + "'";
  auto cell = read_latch(keys_, name, initial, deadline, step, [&] { return keys_.read_cell(name, deadline, step); });
  if (!cell) return cell.status();
  LatchRead out{cell->value, nullptr};
  if (cell->value > 0 && watch) {
    // Any change after the one we read.
    auto signal = std::make_shared<Signal>();
    auto id = session_.watch(
        keys_.key(name), "", false, signal, *cell->version,
        [&]() -> Result<bool> {
          auto now = keys_.read_cell(name, deadline, step);
          if (!now) return now.status();
          return now->version != cell->version;
        },
        deadline);
    if (!id) return id.status();
    out.change = std::make_unique<WatchWaiter>(session_, *id, std::move(signal));
  }
  return out;
}

Result<std::int64_t> Latches::count_down(const std::string& name, std::int64_t initial, std::int64_t n,
                                         steady::time_point deadline) {
  return count_down_latch(keys_, name, initial, n, deadline);
}

}  // namespace dlock::detail::etcd
