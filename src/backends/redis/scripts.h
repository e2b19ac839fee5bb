// scripts.h — the Lua scripts of the redis backend (text in scripts.cpp).
//
// Every script gets its keys through KEYS[] (so ACL key patterns apply) and
// runs atomically on the server; all keys of one call share the name's hash
// tag, so one cluster slot. The keys each family expects are listed below
// and laid out in redis_backend.cpp. A waiter entry is "<client id>/<slot>/<nonce>";
// a wake-up is a PUBLISH on "<prefix>client:<client id>" of
// "<entry>\n<tag>" (subscriber.h; a mutex's handover adds the token, the
// server's clock, the lease and the wait's secret, kept in the keys); redis+cluster passes "" as the channel
// prefix, and the wake-up is an SPUBLISH on "<prefix>{<name>}:client:<client
// id>" (the key base of KEYS[1]), in the script's own slot.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace dlock::detail::redis {

enum class Script {
  // Mutex, and an Election's leadership (with KEYS[4] observers):
  // KEYS lock hash {owner, token, last_token[, data]}, queue list, waiters zset[, observers zset]
  acquire,        // take the lock or queue us; {1, token} or {0, ms until worth retrying (-1 unknown)}
  release,        // owner+token checked delete, keep last_token, wake one; 1 or 0 (not ours)
  renew,          // KEYS[1] only: owner+token checked PEXPIRE; 1 or 0 (not ours)
  leave,          // take our waiter entry out of the queue; pass a wake-up on if we had it
  force_release,  // drop the holder whoever it is, keep last_token, wake one; 1 or 0 (was free)
  observe,        // KEYS lock, observers: {1, data} or {0}; registers a watcher entry if given
  // SharedMutex: KEYS rw hash {writer, wtoken, wexp, last_token}, readers zset (owner -> expiry),
  // reader tokens hash, queue list, waiters zset
  rw_acquire,     // {1, token} or {0, ms until worth retrying (-1 unknown)}
  rw_release,     // 1 or 0 (not ours); wakes the writer or the readers that may go now
  rw_renew,       // KEYS 1-3: 1 or 0
  rw_leave,       // as leave, for the read-write queue
  rw_force,       // drops the writer and every reader; 1 or 0 (was free)
  // Semaphore: KEYS meta hash {declared, last_token}, permits zset (owner -> expiry), permit
  // tokens hash, queue list, waiters zset
  permit_acquire,  // {1, token}, {0, ms until worth retrying}, or {-1, declared} (count conflicts)
  permit_release,  // 1 or 0 (not ours); wakes one waiter per free permit
  permit_renew,    // KEYS 1-3: 1 or 0
  permit_leave,    // as leave, waking as many as there are free permits
  permit_force,    // drops every permit; 1 or 0 (none was out)
  // Counter: KEYS counter hash {value, width}
  counter_store,  // {1} or {-1, width} (out of range)
  counter_add,    // {1, value before} or {-1, width, value before} (the sum is out of range or overflows)
  counter_cas,    // {1} or {0, value seen} or {-1, width}
  // Latch: KEYS latch hash {count}, watchers zset
  latch_read,        // the count (a string); registers a watcher entry if given and count > 0
  latch_count_down,  // the count after; wakes every watcher when it reaches 0
  // Barrier: KEYS state hash {open}, members zset (member -> expiry), left set, watchers zset
  barrier_join,    // 1
  barrier_enter,   // 1 (open), 0 (not yet), -1 (our member is gone)
  barrier_leave,   // 1 (everyone has left), 0 (not yet)
  barrier_remove,  // 1
  member_renew,    // KEYS 1-2: 1 or 0
  // After a failover (redis+sentinel): 3 KEYS per hold (its family's first
  // three; a mutex's lock key thrice), ARGV kind, owner, token per hold;
  // changes nothing. A list of 1 (still ours) or 0 (gone), in order.
  revalidate,  // the last (script_count)
};
// revalidate is the last.
inline constexpr std::size_t script_count = static_cast<std::size_t>(Script::revalidate) + 1;

// Every script, in order.
inline constexpr std::array<Script, script_count> all_scripts = [] {
  std::array<Script, script_count> out{};
  for (std::size_t i = 0; i < script_count; ++i) out[i] = static_cast<Script>(i);
  return out;
}();

// The Lua source of a script.
const std::string& script_text(Script script);
// For messages: "acquire", "release", ...
std::string_view script_name(Script script);

}  // namespace dlock::detail::redis
