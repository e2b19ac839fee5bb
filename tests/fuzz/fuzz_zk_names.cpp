// Fuzzes how the zk:// backend reads a lock node's children
// (backends/zookeeper/contenders.h): the input's first byte picks the
// primitive, its second which child is ours, and the rest, cut at each
// newline, is the child list ZooKeeper returned. Beyond not crashing:
//   - a sequence number is the name's last 10 digits, or the name is refused;
//   - the queue order is a strict weak order (checked on every pair and
//     triple), the queue holds exactly the children of that primitive,
//     sorted by it;
//   - the node a waiter watches is before its own in that order, and is the
//     one Curator's recipes name (the one before, two before, or a reader's
//     first writer); the holder is the queue's head;
//   - a name segment check_segment() and validate_name() accept is never
//     taken for a contender.
#include "backends/zookeeper/config.h"
#include "backends/zookeeper/contenders.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace zk = dlock::detail::zookeeper;
using dlock::detail::LockKind;

void check(bool ok) {
  if (!ok) std::abort();
}

bool digit(char c) { return c >= '0' && c <= '9'; }

void sequence(std::string_view child) {
  const auto n = zk::sequence_of(child);
  const bool ends_in_digits =
      child.size() >= 10 && std::all_of(child.end() - 10, child.end(), [](char c) { return digit(c); });
  check(n.has_value() == ends_in_digits);
  if (n) check(*n >= 0 && *n <= 9'999'999'999 && std::to_string(*n) == std::to_string(std::stoll(std::string(child.substr(child.size() - 10)))));
}

void order(const std::vector<std::string>& names) {
  const std::size_t n = std::min<std::size_t>(names.size(), 12);
  for (std::size_t i = 0; i < n; ++i) {
    check(!zk::queued_before(names[i], names[i]));
    for (std::size_t j = 0; j < n; ++j) {
      const bool ij = zk::queued_before(names[i], names[j]), ji = zk::queued_before(names[j], names[i]);
      check(!(ij && ji));
      // Total on distinct names: one of two nodes is always first.
      check(names[i] == names[j] || ij || ji);
      for (std::size_t k = 0; k < n; ++k)
        if (ij && zk::queued_before(names[j], names[k])) check(zk::queued_before(names[i], names[k]));
    }
  }
}

void queue(const std::vector<std::string>& children, LockKind kind, std::size_t pick) {
  const auto q = zk::contenders(children, kind);
  check(std::is_sorted(q.begin(), q.end(), [](const std::string& a, const std::string& b) {
    return zk::queued_before(a, b);
  }));
  std::vector<std::string> expected;
  for (const auto& c : children)
    if (zk::is_contender(c, kind)) expected.push_back(c);
  std::vector<std::string> got = q;
  std::sort(expected.begin(), expected.end());
  std::sort(got.begin(), got.end());
  check(got == expected);
  for (const auto& c : q) check(zk::sequence_of(c).has_value());

  const std::string ours = pick < children.size() ? children[pick] : std::string("_c_none-lock-0000000001");
  const auto place = zk::place_in_queue(q, ours, kind);
  const auto at = std::find(q.begin(), q.end(), ours);
  check(place.ours.has_value() == (at != q.end()));
  if (!place.ours) return check(!place.blocker && !place.then_watch);
  const std::size_t i = *place.ours;
  check(i < q.size() && q[i] == ours);
  const auto writer = [](const std::string& s) { return s.find(zk::write_marker) != std::string::npos; };
  if (kind == LockKind::read) {
    const auto first_writer = std::find_if(q.begin(), q.begin() + static_cast<long>(i), writer);
    if (first_writer == q.begin() + static_cast<long>(i)) return check(!place.blocker);
    check(place.blocker && *place.blocker == static_cast<std::size_t>(first_writer - q.begin()));
  } else {
    if (i == 0) return check(!place.blocker);
    check(place.blocker && *place.blocker == (i == 1 ? 0 : i - 2));
    check(place.last_blocker == (i == 1));
    check(place.then_watch.has_value() == (i == 2) && (!place.then_watch || *place.then_watch == 1));
  }
  check(*place.blocker < i && !zk::queued_before(q[i], q[*place.blocker]));
}

void holders(const std::vector<std::string>& children) {
  for (const auto& [node, kind] : zk::holders(children)) {
    const LockKind k = kind == "mutex" ? LockKind::mutex : kind == "leader" ? LockKind::leader : LockKind::read;
    check(kind == "mutex" || kind == "leader" || kind == "read" || kind == "write");
    check(zk::is_contender(node, k));
    const auto q = zk::contenders(children, k);
    if (kind != "read") check(q.front() == node);
    if (kind == "write") check(node.find(zk::write_marker) != std::string::npos);
  }
}

void segment(std::string_view child) {
  if (!zk::check_segment(child, "child").ok() || zk::looks_like_contender(child)) return;
  for (LockKind kind : {LockKind::mutex, LockKind::read, LockKind::write, LockKind::leader})
    check(!zk::is_contender(child, kind));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  constexpr LockKind kinds[] = {LockKind::mutex, LockKind::read, LockKind::write, LockKind::leader};
  const LockKind kind = kinds[data[0] % 4];
  const std::size_t pick = data[1];
  std::string_view rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  std::vector<std::string> children;
  while (children.size() < 64) {
    const auto cut = rest.find('\n');
    children.emplace_back(rest.substr(0, cut));
    if (cut == std::string_view::npos) break;
    rest.remove_prefix(cut + 1);
  }
  for (const auto& c : children) {
    sequence(c);
    segment(c);
  }
  order(children);
  queue(children, kind, pick);
  holders(children);
  return 0;
}
