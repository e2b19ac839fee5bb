#include "backends/zookeeper/contenders.h"

#include <algorithm>

namespace dlock::detail::zookeeper {
namespace {

bool holds(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

bool is_writer(std::string_view node) { return holds(node, write_marker); }

}  // namespace

std::string_view node_name(LockKind kind) {
  switch (kind) {
    case LockKind::write: return write_marker;
    case LockKind::read: return read_marker;
    case LockKind::leader: return latch_marker.substr(1);
    default: return lock_marker.substr(1);
  }
}

std::optional<std::int64_t> sequence_of(std::string_view child) {
  constexpr std::size_t width = 10;
  if (child.size() < width) return std::nullopt;
  std::int64_t value = 0;
  for (char c : child.substr(child.size() - width)) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

bool is_contender(std::string_view child, LockKind kind) {
  if (!sequence_of(child)) return false;
  if (kind == LockKind::mutex) return holds(child, lock_marker);
  if (kind == LockKind::leader) return holds(child, latch_marker);
  return holds(child, read_marker) || holds(child, write_marker);
}

bool looks_like_contender(std::string_view segment) {
  return segment.starts_with("_c_") || holds(segment, lock_marker) || holds(segment, latch_marker) ||
         holds(segment, read_marker) || holds(segment, write_marker);
}

bool queued_before(std::string_view a, std::string_view b) {
  const auto sa = sequence_of(a).value_or(-1), sb = sequence_of(b).value_or(-1);
  return sa != sb ? sa < sb : a < b;
}

std::vector<std::string> contenders(std::vector<std::string> children, LockKind kind) {
  std::erase_if(children, [&](const std::string& c) { return !is_contender(c, kind); });
  std::sort(children.begin(), children.end(),
            [](const std::string& a, const std::string& b) { return queued_before(a, b); });
  return children;
}

std::vector<std::pair<std::string, std::string>> holders(const std::vector<std::string>& children) {
  std::vector<std::pair<std::string, std::string>> out;
  if (auto q = contenders(children, LockKind::mutex); !q.empty()) out.emplace_back(q.front(), "mutex");
  if (auto q = contenders(children, LockKind::leader); !q.empty()) out.emplace_back(q.front(), "leader");
  const auto rw = contenders(children, LockKind::read);
  if (!rw.empty() && is_writer(rw.front())) {
    out.emplace_back(rw.front(), "write");
  } else {
    for (const auto& node : rw) {
      if (is_writer(node)) break;
      out.emplace_back(node, "read");
    }
  }
  return out;
}

QueuePlace place_in_queue(const std::vector<std::string>& queue, std::string_view ours, LockKind kind) {
  QueuePlace out;
  const auto at = std::find(queue.begin(), queue.end(), ours);
  if (at == queue.end()) return out;
  const auto index = static_cast<std::size_t>(at - queue.begin());
  out.ours = index;
  if (kind != LockKind::read) {
    if (index == 0) return out;
    out.blocker = index == 1 ? index - 1 : index - 2;
    out.last_blocker = index == 1;
    if (index == 2) out.then_watch = index - 1;
    return out;
  }
  const auto writer = std::find_if(queue.begin(), at, [](const std::string& n) { return is_writer(n); });
  if (writer == at) return out;
  out.blocker = static_cast<std::size_t>(writer - queue.begin());
  out.last_blocker = std::count_if(queue.begin(), at, [](const std::string& n) { return is_writer(n); }) == 1;
  return out;
}

}  // namespace dlock::detail::zookeeper
