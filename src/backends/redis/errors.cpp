#include "backends/redis/errors.h"

#include <hiredis.h>
#include <netdb.h>

#include <cstring>
#include <string>

namespace dlock::detail::redis {
namespace {

bool starts_with(std::string_view text, std::string_view word) {
  return text.substr(0, word.size()) == word &&
         (text.size() == word.size() || text[word.size()] == ' ' || text[word.size()] == '\n');
}

}  // namespace

bool is_noscript(const redisReply* reply) {
  return reply && reply->type == REDIS_REPLY_ERROR && starts_with({reply->str, reply->len}, "NOSCRIPT");
}

Status to_status(const redisContext* context, const redisReply* reply, std::string_view step, std::string_view key) {
  std::string what = "redis backend: " + std::string(step) + ": ";
  if (!reply) {
    // hiredis sets err on the context: I/O (incl. the socket timeouts that
    // bound every call), EOF, protocol. Whatever it is, the connection is
    // unusable and the call may be retried on a new one.
    if (context && context->err == REDIS_ERR_IO && context->errstr[0] &&
        std::string_view(context->errstr).find("temporarily unavailable") != std::string_view::npos)
      return Status(errc::unavailable, what + "no answer within ClientOptions::op_timeout");
    what += context && context->errstr[0] ? context->errstr : "connection failed";
    return Status(errc::unavailable, what);
  }
  if (reply->type != REDIS_REPLY_ERROR) return Status(errc::internal, what + "unexpected reply type");
  const std::string_view text(reply->str, reply->len);
  if (starts_with(text, "NOAUTH") || starts_with(text, "WRONGPASS") || text.starts_with("ERR AUTH") ||
      text.starts_with("ERR Client sent AUTH"))
    return Status(errc::invalid_argument,
                  what + "credentials rejected (check the user and password in the URL, or the server's "
                         "requirepass / ACL)");
  if (starts_with(text, "NOPERM"))
    return Status(errc::invalid_argument,
                  what + "the server's ACL forbids it (" + std::string(text) +
                      "); the user needs EVALSHA, SCRIPT, PUBLISH, SUBSCRIBE, SCAN, HMGET, PTTL, PING on "
                      "the prefix's keys and channels");
  if (starts_with(text, "WRONGTYPE"))
    return Status(errc::invalid_argument,
                  what + "key " + std::string(key) + " holds another type (not a dlock lock)");
  if (text.starts_with("ERR DB index") || text.starts_with("ERR invalid DB index"))
    return Status(errc::invalid_argument, what + "db: " + std::string(text));
  for (std::string_view transient : {"LOADING", "BUSY", "MASTERDOWN", "READONLY", "OOM", "TRYAGAIN", "CLUSTERDOWN"})
    if (starts_with(text, transient)) return Status(errc::unavailable, what + std::string(text));
  if (starts_with(text, "MOVED") || starts_with(text, "ASK"))
    return Status(errc::internal, what + "the server is a Redis Cluster node (" + std::string(text) +
                                      "); redis:// speaks to one server only");
  return Status(errc::internal, what + std::string(text));
}

Status io_error(std::string_view step, int error) {
  // The texts hiredis gives for the same failures.
  return Status(errc::unavailable, "redis backend: " + std::string(step) + ": " +
                                       (error == 0 ? std::string("Server closed the connection")
                                                   : std::string(std::strerror(error))));
}

Status no_answer(std::string_view step) {
  return Status(errc::unavailable,
                "redis backend: " + std::string(step) + ": no answer within ClientOptions::op_timeout");
}

Status resolve_error(std::string_view step, int error) {
  return Status(errc::unavailable, "redis backend: " + std::string(step) + ": looking up the host name: " +
                                       (error == EAI_SYSTEM ? std::strerror(errno) : gai_strerror(error)));
}

}  // namespace dlock::detail::redis
