// Fuzzes what the redis backend makes of Redis's replies
// (backends/redis/replies.h, errors.h). The input is RESP bytes, as a
// server sends them: hiredis's own reader turns them into reply trees,
// so the trees are ones a server (or anything on its port) could send,
// and each tree goes to every function that reads one. Beyond not
// crashing, leaking or undefined behaviour, what a function returns is
// checked against the reply independently:
//   - a MOVED/ASK redirection is followed only with a slot 0..16383 and a
//     port 1..65535 written as plain digits, to a host without blanks;
//   - CLUSTER SLOTS ranges and sentinel addresses are in range and usable;
//   - CLUSTER NODES' own id is one of the ids it lists;
//   - script answers are read only when they have the script's shape, and
//     times in them are bounded so adding them to a clock cannot overflow;
//   - every error reply becomes an error Status naming the step.
#include "backends/redis/errors.h"
#include "backends/redis/replies.h"

#include <hiredis.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

namespace r = dlock::detail::redis;
using dlock::detail::Endpoint;

void check(bool ok) {
  if (!ok) std::abort();
}

std::string_view text(const redisReply* reply) {
  return reply && (reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_STATUS ||
                   reply->type == REDIS_REPLY_ERROR)
             ? std::string_view(reply->str, reply->len)
             : std::string_view();
}

bool digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool usable(const Endpoint& e) {
  return !e.host.empty() && e.port && *e.port != 0 &&
         std::none_of(e.host.begin(), e.host.end(), [](char c) { return static_cast<unsigned char>(c) <= ' '; });
}

const Endpoint asked{"10.0.0.1", 7000};

void redirect(const redisReply* reply) {
  const auto got = r::redirect_of(reply, asked);
  if (!got) return;
  std::string_view t = text(reply);
  check(reply->type == REDIS_REPLY_ERROR);
  check(got->ask ? t.starts_with("ASK ") : t.starts_with("MOVED "));
  t.remove_prefix(t.find(' ') + 1);
  const std::string_view slot = t.substr(0, t.find(' ')), port = t.substr(t.rfind(':') + 1);
  check(digits(slot) && digits(port));
  check(got->slot >= 0 && got->slot <= 16383 && std::stoul(std::string(slot)) == static_cast<unsigned>(got->slot));
  check(usable(got->at) && std::stoul(std::string(port)) == *got->at.port);
}

void cluster(const redisReply* reply) {
  if (auto ranges = r::slot_ranges_of(reply, asked)) {
    check(reply->type == REDIS_REPLY_ARRAY && ranges->size() <= reply->elements);
    for (const auto& range : *ranges)
      check(range.first >= 0 && range.first <= range.last && range.last <= 16383 && usable(range.master));
  } else {
    check(reply->type != REDIS_REPLY_ARRAY && !ranges.status().message().empty());
  }
  if (auto nodes = r::cluster_nodes_of(reply)) {
    check(reply->type == REDIS_REPLY_STRING && !nodes->myself.empty() && nodes->known.count(nodes->myself));
    check(text(reply).find("myself") != std::string_view::npos);
    for (const auto& id : nodes->known) check(!id.empty() && id.find_first_of(" \n") == std::string::npos);
  }
}

void sentinel(const redisReply* reply) {
  if (auto master = r::master_address_of(reply)) {
    check(reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 && usable(*master));
    check(master->host == text(reply->element[0]) && digits(text(reply->element[1])));
  }
  const std::string role = r::role_of(reply);
  check(!role.empty() && (role == "?" || (reply->type == REDIS_REPLY_ARRAY && role == text(reply->element[0]))));
  if (auto master = r::switched_master_of(text(reply), "mymaster")) {
    check(usable(*master) && text(reply).starts_with("mymaster "));
  }
}

void wake(std::string_view payload) {
  const auto got = r::wake_of(payload);
  if (!got) return;
  for (std::string_view part : {got->owner, got->nonce}) check(part.find_first_of("/\n") == std::string_view::npos);
  check(got->name.find('\n') == std::string_view::npos);
  check(payload.find(std::string(got->owner) + "/" + std::string(got->nonce) + "\n" + std::string(got->name)) !=
        std::string_view::npos);
  if (got->handover)
    check(got->server_ms >= 0 && got->server_ms <= r::latest_server_ms && got->lease_ms >= 0 &&
          got->lease_ms <= r::longest_ms);
}

void pubsub(const redisReply* reply) {
  if (auto message = r::message_of(reply)) {
    const auto kind = text(reply->element[0]);
    check(reply->type == REDIS_REPLY_ARRAY && reply->elements == 3 && (kind == "message" || kind == "smessage"));
    check(message->payload == text(reply->element[2]));
    wake(message->payload);
  }
  wake(text(reply));
}

void scripts(const redisReply* reply) {
  if (auto got = r::acquire_reply_of(reply)) {
    check(reply->type == REDIS_REPLY_ARRAY && reply->elements >= 2);
    using Outcome = r::AcquireReply::Outcome;
    const long long code = reply->element[0]->type == REDIS_REPLY_INTEGER ? reply->element[0]->integer : 99;
    check(code == (got->outcome == Outcome::granted ? 1 : got->outcome == Outcome::busy ? 0 : -1));
    if (got->outcome == Outcome::granted) check(digits(text(reply->element[1])));
    if (got->holder_ms) check(*got->holder_ms >= 0 && *got->holder_ms <= r::longest_ms);
    check(got->server_ms >= -1 && got->server_ms <= r::latest_server_ms);
  }
  if (auto released = r::release_reply_of(reply))
    check(reply->type == REDIS_REPLY_INTEGER && reply->integer >= 0 && reply->integer <= 2 &&
          *released == (reply->integer != 0));
  if (auto renewed = r::renew_reply_of(reply))
    check(reply->type == REDIS_REPLY_INTEGER && *renewed == (reply->integer == 1));
  if (auto n = r::unsigned_number(reply)) check(digits(text(reply)) && std::to_string(*n).size() <= reply->len);
  if (auto n = r::signed_number(reply)) check(reply->type == REDIS_REPLY_STRING && reply->len > 0);
  check(r::integer(reply) == (reply->type == REDIS_REPLY_INTEGER ? reply->integer : -1));
}

void errors(const redisReply* reply) {
  const auto status = r::to_status(nullptr, reply, "fuzzing", "k");
  check(!status.ok() && status.message().starts_with("redis backend: fuzzing: "));
  if (r::is_noscript(reply)) check(reply->type == REDIS_REPLY_ERROR && text(reply).starts_with("NOSCRIPT"));
}

// Every function on `reply` and, an array's elements being replies of
// their own (a script's answer inside EXEC, a pipeline), on each of them.
void every_reader(const redisReply* reply, int depth) {
  redirect(reply);
  cluster(reply);
  sentinel(reply);
  pubsub(reply);
  scripts(reply);
  errors(reply);
  if (reply->type == REDIS_REPLY_ARRAY && depth < 3)
    for (std::size_t i = 0; i < reply->elements; ++i) every_reader(reply->element[i], depth + 1);
}

// Whether the input announces an array of more than `most` elements:
// hiredis 0.14's reader allocates the element array a "*<n>" header
// announces before any element arrives (8 bytes each), so "*795801063"
// costs 6 GB. That is hiredis's, not what dlock reads out of a reply;
// such inputs are skipped (docs/reliability.md, Fuzzing).
bool announces_huge_array(std::string_view input, unsigned long most) {
  for (auto at = input.find('*'); at != std::string_view::npos; at = input.find('*', at + 1)) {
    unsigned long n = 0;
    for (std::size_t i = at + 1; i < input.size() && input[i] >= '0' && input[i] <= '9' && n <= most; ++i)
      n = n * 10 + static_cast<unsigned long>(input[i] - '0');
    if (n > most) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (announces_huge_array({reinterpret_cast<const char*>(data), size}, 65'536)) return 0;
  redisReader* reader = redisReaderCreate();
  if (!reader) return 0;
  if (redisReaderFeed(reader, reinterpret_cast<const char*>(data), size) == REDIS_OK) {
    for (int n = 0; n < 64; ++n) {
      void* raw = nullptr;
      if (redisReaderGetReply(reader, &raw) != REDIS_OK || !raw) break;
      every_reader(static_cast<const redisReply*>(raw), 0);
      freeReplyObject(raw);
    }
  }
  redisReaderFree(reader);
  return 0;
}
