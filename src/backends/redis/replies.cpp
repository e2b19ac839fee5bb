#include "backends/redis/replies.h"

#include <algorithm>

namespace dlock::detail::redis {
namespace {

// A string or status reply's text ("" for any other).
std::string_view text_of(const redisReply* r) {
  return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) ? std::string_view(r->str, r->len)
                                                                             : std::string_view();
}

bool is_array(const redisReply* r, std::size_t at_least) {
  return r && r->type == REDIS_REPLY_ARRAY && r->elements >= at_least;
}

// `text` is exactly a decimal T.
template <class T>
bool whole_number(std::string_view text, T& value) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc{} && end == text.data() + text.size();
}

// `text` cut at each `separator`.
std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> out;
  for (;;) {
    const auto cut = text.find(separator);
    out.push_back(text.substr(0, cut));
    if (cut == std::string_view::npos) return out;
    text.remove_prefix(cut + 1);
  }
}

}  // namespace

std::optional<std::uint16_t> port_of(std::string_view text) {
  unsigned value = 0;
  if (!whole_number(text, value) || value == 0 || value > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(value);
}

bool usable_host(std::string_view host) {
  return !host.empty() && host.size() <= 255 &&
         std::none_of(host.begin(), host.end(), [](char c) { return static_cast<unsigned char>(c) <= ' ' || c == 0x7f; });
}

std::optional<Redirect> redirect_of(const redisReply* r, const Endpoint& asked) {
  if (!r || r->type != REDIS_REPLY_ERROR) return std::nullopt;
  return redirect_of(std::string_view(r->str, r->len), asked);
}

std::optional<Redirect> redirect_of(std::string_view text, const Endpoint& asked) {
  Redirect out;
  if (text.starts_with("MOVED "))
    text.remove_prefix(6);
  else if (text.starts_with("ASK "))
    out.ask = true, text.remove_prefix(4);
  else
    return std::nullopt;
  // "<slot> <host>:<port>"; the host may be an IPv6 address (colons), so
  // the port is after the last colon.
  const auto space = text.find(' ');
  const auto colon = text.rfind(':');
  if (space == std::string_view::npos || colon == std::string_view::npos || colon < space) return std::nullopt;
  const auto port = port_of(text.substr(colon + 1));
  unsigned slot = 0;  // (unsigned: no sign, not even "-0")
  if (!whole_number(text.substr(0, space), slot) || slot > 16383 || !port) return std::nullopt;
  out.slot = static_cast<int>(slot);
  const std::string_view host = text.substr(space + 1, colon - space - 1);
  out.at = Endpoint{std::string(host.empty() ? std::string_view(asked.host) : host), *port};
  if (!usable_host(out.at.host)) return std::nullopt;
  return out;
}

Result<std::vector<SlotRange>> slot_ranges_of(const redisReply* r, const Endpoint& asked) {
  if (!r || r->type != REDIS_REPLY_ARRAY) return Status(errc::internal, "CLUSTER SLOTS: not an array");
  std::vector<SlotRange> out;
  for (std::size_t i = 0; i < r->elements; ++i) {
    const redisReply* range = r->element[i];
    if (!is_array(range, 3) || !is_array(range->element[2], 2)) continue;
    const redisReply* master = range->element[2];
    if (range->element[0]->type != REDIS_REPLY_INTEGER || range->element[1]->type != REDIS_REPLY_INTEGER ||
        master->element[1]->type != REDIS_REPLY_INTEGER)
      continue;
    const long long first = range->element[0]->integer, last = range->element[1]->integer,
                    port = master->element[1]->integer;
    if (first < 0 || last > 16383 || first > last || port <= 0 || port > 65535) continue;
    // A NULL or empty host: the node asked (Redis 7's cluster-preferred-endpoint-type).
    const std::string_view host = text_of(master->element[0]);
    Endpoint at{std::string(host.empty() ? std::string_view(asked.host) : host), static_cast<std::uint16_t>(port)};
    if (!usable_host(at.host)) continue;
    out.push_back({static_cast<int>(first), static_cast<int>(last), std::move(at)});
  }
  return out;
}

Result<ClusterNodes> cluster_nodes_of(const redisReply* r) {
  if (!r || r->type != REDIS_REPLY_STRING)
    return Status(errc::internal, "CLUSTER NODES: not text");
  ClusterNodes out;
  for (std::string_view line : split({r->str, r->len}, '\n')) {
    const auto fields = split(line, ' ');
    if (fields.size() < 3 || fields[0].empty()) continue;
    const auto flags = split(fields[2], ',');
    if (std::find(flags.begin(), flags.end(), "myself") != flags.end()) {
      if (!out.myself.empty() && out.myself != fields[0])
        return Status(errc::internal, "CLUSTER NODES: two lines are flagged 'myself'");
      out.myself = std::string(fields[0]);
    }
    out.known.emplace(fields[0]);
  }
  if (out.myself.empty()) return Status(errc::internal, "CLUSTER NODES: no line is flagged 'myself'");
  return out;
}

std::optional<Endpoint> master_address_of(const redisReply* r) {
  if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) return std::nullopt;
  const auto port = port_of(text_of(r->element[1]));
  const std::string_view host = text_of(r->element[0]);
  if (!port || !usable_host(host)) return std::nullopt;
  return Endpoint{std::string(host), *port};
}

std::string role_of(const redisReply* r) {
  const std::string_view role = is_array(r, 1) ? text_of(r->element[0]) : std::string_view();
  return role.empty() ? "?" : std::string(role);
}

std::optional<Endpoint> switched_master_of(std::string_view payload, std::string_view master_name) {
  const auto words = split(payload, ' ');
  if (words.size() != 5 || words[0] != master_name || !usable_host(words[3])) return std::nullopt;
  const auto port = port_of(words[4]);
  if (!port) return std::nullopt;
  return Endpoint{std::string(words[3]), *port};
}

std::optional<Message> message_of(const redisReply* r) {
  if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 3) return std::nullopt;
  for (std::size_t i = 0; i < 3; ++i)
    if (r->element[i]->type != REDIS_REPLY_STRING) return std::nullopt;
  const std::string_view kind(r->element[0]->str, r->element[0]->len);
  if (kind != "message" && kind != "smessage") return std::nullopt;
  return Message{{r->element[1]->str, r->element[1]->len}, {r->element[2]->str, r->element[2]->len}};
}

std::optional<Wake> wake_of(std::string_view payload) {
  // (Owners hold no '/', names no control characters.)
  const auto lines = split(payload, '\n');
  if (lines.size() != 1 + 1 && lines.size() != 1 + 4 && lines.size() != 1 + 5) return std::nullopt;
  const auto who = split(lines[0], '/');
  if (who.size() != 3) return std::nullopt;
  Wake out;
  out.owner = who[1];
  out.nonce = who[2];
  out.name = lines[1];
  if (lines.size() >= 5) {
    out.handover = true;
    if (lines.size() == 6) {
      out.secret = lines[5];
      if (out.secret.empty()) return std::nullopt;
    }
    if (!whole_number(lines[2], out.token) || !whole_number(lines[3], out.server_ms) ||
        !whole_number(lines[4], out.lease_ms))
      return std::nullopt;
    if (out.server_ms < 0 || out.server_ms > latest_server_ms || out.lease_ms < 0 || out.lease_ms > longest_ms)
      return std::nullopt;
  }
  return out;
}

std::optional<AcquireReply> acquire_reply_of(const redisReply* r) {
  // (The code must be an integer: integer() reads anything else as -1.)
  if (!is_array(r, 2) || r->element[0]->type != REDIS_REPLY_INTEGER) return std::nullopt;
  AcquireReply out;
  switch (r->element[0]->integer) {
    case 1:
      if (auto token = unsigned_number(r->element[1])) {
        out.outcome = AcquireReply::Outcome::granted;
        out.token = *token;
        return out;
      }
      return std::nullopt;
    case 0:
      out.outcome = AcquireReply::Outcome::busy;
      if (const std::int64_t left = integer(r->element[1]); left >= 0 && left <= longest_ms) out.holder_ms = left;
      if (r->elements >= 3) {
        out.server_ms = signed_number(r->element[2]).value_or(-1);
        if (out.server_ms < 0 || out.server_ms > latest_server_ms) out.server_ms = -1;
      }
      if (r->elements >= 4)
        if (auto ask = signed_number(r->element[3]); ask && *ask >= 0 && *ask <= longest_ms) out.ask_again_ms = ask;
      return out;
    case -1:
      if (r->element[1]->type != REDIS_REPLY_STRING) return std::nullopt;
      out.outcome = AcquireReply::Outcome::other_permits;
      out.stored_permits = text_of(r->element[1]);
      return out;
    default:
      return std::nullopt;
  }
}

std::optional<bool> release_reply_of(const redisReply* r) {
  if (!r || r->type != REDIS_REPLY_INTEGER) return std::nullopt;
  switch (r->integer) {
    case 1:
    case 2:  // our thread holds it again under a newer token: nothing to release
      return true;
    case 0:
      return false;
    default:
      return std::nullopt;
  }
}

std::optional<bool> renew_reply_of(const redisReply* r) {
  if (!r || r->type != REDIS_REPLY_INTEGER || (r->integer != 0 && r->integer != 1)) return std::nullopt;
  return r->integer == 1;
}

}  // namespace dlock::detail::redis
