// scripts.h — the Lua scripts of the redis backend (text in scripts.cpp).
//
// Every script gets its keys through KEYS[] (so ACL key patterns apply) and
// runs atomically on the server. Keys of one lock (see redis_backend.cpp):
//   KEYS[1] lock     hash {owner, token, last_token}
//   KEYS[2] queue    list of waiter entries, oldest first
//   KEYS[3] waiters  zset: waiter entry -> liveness deadline (server ms)
// A waiter entry is "<client id>/<owner>"; a wake-up is a PUBLISH on
// "<prefix>client:<client id>" of "<entry>\n<lock name>".
#pragma once

#include <array>
#include <string>
#include <string_view>

namespace dlock::detail::redis {

enum class Script {
  acquire,        // take the lock or queue us; {1, token} or {0, ms until worth retrying (-1 unknown)}
  release,        // owner+token checked delete, keep last_token, wake one; 1 or 0 (not ours)
  renew,          // owner+token checked PEXPIRE; 1 or 0 (not ours)
  leave,          // take our waiter entry out of the queue; pass a wake-up on if we had it
  force_release,  // drop the holder whoever it is, keep last_token, wake one; 1 or 0 (was free)
};
inline constexpr std::size_t script_count = 5;

inline constexpr std::array<Script, script_count> all_scripts = {Script::acquire, Script::release, Script::renew,
                                                                  Script::leave, Script::force_release};

// The Lua source of a script.
const std::string& script_text(Script script);
// For messages: "acquire", "release", ...
std::string_view script_name(Script script);

}  // namespace dlock::detail::redis
