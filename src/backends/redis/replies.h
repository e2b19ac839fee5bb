// replies.h — what the redis backend reads out of Redis's replies: each
// function takes one reply tree (as hiredis built it) and returns what it
// says, or nothing (or an error) when it says something else. They do no
// I/O and keep nothing, so a reply a server or a man in the middle made up
// can only be refused, never followed; tests/fuzz/fuzz_redis_replies.cpp
// feeds them every tree hiredis's reader builds from arbitrary bytes.
#pragma once

#include "core/url.h"

#include <dlock/status.h>

#include <hiredis.h>

#include <charconv>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::detail::redis {

// The longest lease or wait a script reports (ten years): a larger one is
// not one dlock gave, and adding it to a clock would overflow.
inline constexpr std::int64_t longest_ms = 10LL * 366 * 24 * 3600 * 1000;
// The latest server clock (Unix ms) taken as one (the year 33658).
inline constexpr std::int64_t latest_server_ms = 1'000'000'000'000'000;

// An integer reply's value; -1 for any other reply (no script answers -1
// where a count or a yes/no is expected without meaning "refused").
inline std::int64_t integer(const redisReply* r) { return r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1; }

// A bulk string reply holding exactly a decimal T (no sign for unsigned,
// no blanks), else nullopt.
template <class T>
std::optional<T> number(const redisReply* r) {
  if (!r || r->type != REDIS_REPLY_STRING) return std::nullopt;
  T value{};
  auto [ptr, ec] = std::from_chars(r->str, r->str + r->len, value);
  if (ec != std::errc{} || ptr != r->str + r->len) return std::nullopt;
  return value;
}
inline std::optional<std::int64_t> signed_number(const redisReply* r) { return number<std::int64_t>(r); }
inline std::optional<std::uint64_t> unsigned_number(const redisReply* r) { return number<std::uint64_t>(r); }

// A TCP port: exactly a decimal 1..65535.
std::optional<std::uint16_t> port_of(std::string_view text);

// Whether a host name another node gave us is one to connect to: not
// empty, at most 255 bytes, no blank or control character.
bool usable_host(std::string_view host);

// "MOVED <slot> <host>:<port>" or "ASK <slot> <host>:<port>" from a cluster
// node (an empty host means the node asked: `asked`'s host). nullopt for
// any other reply, and for a redirection whose slot is not 0..16383, port
// not 1..65535, or host not usable_host(): such a command is not sent on.
struct Redirect {
  bool ask = false;
  int slot = -1;
  Endpoint at;
};
std::optional<Redirect> redirect_of(const redisReply* r, const Endpoint& asked);
// The same from an error's text (a reply already turned into a message).
std::optional<Redirect> redirect_of(std::string_view error, const Endpoint& asked);

// CLUSTER SLOTS: [[first, last, [host, port, id...], replicas...], ...].
// Each well-formed range with its master (an empty or NULL host: `asked`'s
// host); a malformed range is skipped (the map is read again later). An
// error only for a reply that is not an array.
struct SlotRange {
  int first = 0;
  int last = 0;
  Endpoint master;
};
Result<std::vector<SlotRange>> slot_ranges_of(const redisReply* r, const Endpoint& asked);

// CLUSTER NODES' text: a line per node, "<id> <address> <flags> ...". The
// id of the line whose flags hold "myself", and every id named; an error
// when the reply is not text or no line is flagged "myself".
struct ClusterNodes {
  std::string myself;
  std::set<std::string> known;
};
Result<ClusterNodes> cluster_nodes_of(const redisReply* r);

// SENTINEL GET-MASTER-ADDR-BY-NAME: [host, port]; nullopt for anything
// else (a NULL: the sentinel does not monitor that name).
std::optional<Endpoint> master_address_of(const redisReply* r);

// ROLE: its first element ("master", "slave", "sentinel"), "?" if the
// reply is not an array starting with one.
std::string role_of(const redisReply* r);

// A sentinel's "+switch-master <name> <old ip> <old port> <new ip> <new
// port>": the new master of `master_name`; nullopt for another master's
// switch or a malformed message.
std::optional<Endpoint> switched_master_of(std::string_view payload, std::string_view master_name);

// A pub/sub push ["message", channel, payload] (or "smessage": sharded
// pub/sub, Redis 7) as (channel, payload);
// nullopt for anything else (subscribe confirmations, PONGs, junk).
struct Message {
  std::string_view channel;
  std::string_view payload;
};
std::optional<Message> message_of(const redisReply* r);

// A wake-up the scripts publish: "<client id>/<owner>/<nonce>\n<name>",
// and "\n<token>\n<server ms>\n<lease ms>\n<secret>" after the name when a
// release handed the lock to that waiter (the wait's secret, as the waiter
// gave it: the subscriber takes no handover without it; a release of an
// older dlock sends none). nullopt for any other payload, and for a
// handover whose server ms is not 0..latest_server_ms or lease not
// 0..longest_ms. Only the form is checked here, not who sent it.
struct Wake {
  std::string_view owner;
  std::string_view nonce;
  std::string_view name;
  bool handover = false;
  std::uint64_t token = 0;
  std::int64_t server_ms = 0;
  std::int64_t lease_ms = 0;
  std::string_view secret;  // "" none
};
std::optional<Wake> wake_of(std::string_view payload);

// The acquire scripts' answer: {1, token} granted; {0, holder's ms left
// [, server ms]} busy; {-1, permits the store has} a semaphore declared
// with another count. nullopt for anything else. A holder's time left
// beyond longest_ms, or a server time beyond latest_server_ms, is unknown.
struct AcquireReply {
  enum class Outcome { granted, busy, other_permits };
  Outcome outcome = Outcome::busy;
  std::uint64_t token = 0;                // granted
  std::optional<std::int64_t> holder_ms;  // busy: the holder's lease left, if the script knew it
  std::int64_t server_ms = -1;            // busy: the server's clock when it ran, -1 unknown
  // busy: ask again in this many ms (a head a release woke and that lost
  // the lock since: no release wakes it again before its bound ends)
  std::optional<std::int64_t> ask_again_ms;
  std::string_view stored_permits;        // other_permits
};
std::optional<AcquireReply> acquire_reply_of(const redisReply* r);

// The release and renew scripts' answer: true done (1, or 2 for a release
// that found a newer hold of ours), false not ours any more (0), nullopt
// anything else.
std::optional<bool> release_reply_of(const redisReply* r);
std::optional<bool> renew_reply_of(const redisReply* r);

}  // namespace dlock::detail::redis
