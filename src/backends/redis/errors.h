// errors.h — the one place hiredis and Redis errors become dlock errors (STYLE rule 4).
#pragma once

#include <dlock/status.h>

#include <string_view>

struct redisContext;
struct redisReply;

namespace dlock::detail::redis {

// Whether `reply` is Redis's "NOSCRIPT" error: the script cache was emptied
// (server restart, SCRIPT FLUSH); the caller loads the script and retries once.
bool is_noscript(const redisReply* reply);

// The failure of `step` as a Status. `reply` is nullptr when hiredis returned
// none (then `context` says why), else an error reply. `key` names the key
// the step touched, for WRONGTYPE ("" if none).
//   I/O error, EOF, timeout, protocol error      -> unavailable (the context is dead: drop it)
//   LOADING, BUSY, MASTERDOWN, READONLY, OOM,
//   TRYAGAIN, CLUSTERDOWN                         -> unavailable: the server can't serve now
//   NOAUTH, WRONGPASS, AUTH misconfiguration       -> invalid_argument "credentials rejected"
//   NOPERM (ACL forbids a command, key or channel) -> invalid_argument
//   WRONGTYPE                                      -> invalid_argument "key <key> holds another type"
//   SELECT out of range                            -> invalid_argument
//   NOSCRIPT (after the one reload), MOVED/ASK,
//   anything else                                  -> internal
// Never contains credentials: hiredis's and Redis's texts don't echo them,
// and AUTH errors are replaced by our own text.
Status to_status(const redisContext* context, const redisReply* reply, std::string_view step,
                 std::string_view key = {});

// Our own socket I/O failed (unavailable; the connection is dead): `error`
// is the errno of a failed send/recv/poll, 0 when the server closed it.
Status io_error(std::string_view step, int error);
// Nothing (or not all) came back before the call's deadline (unavailable).
Status no_answer(std::string_view step);
// Looking up the server's host name failed: `error` is getaddrinfo's code
// (unavailable: a name may resolve later, as a server may come back).
Status resolve_error(std::string_view step, int error);

}  // namespace dlock::detail::redis
