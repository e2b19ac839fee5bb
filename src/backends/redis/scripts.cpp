#include "backends/redis/scripts.h"

namespace dlock::detail::redis {
namespace {

// Helpers for the scripts that free the lock or change the queue's head.
// Every redis.call costs the server about as much as the script's own
// start (~1.5 µs), so the paths taken without waiters make as few as they can.
constexpr std::string_view prelude = R"lua(
-- The server's clock in ms (TIME is allowed: scripts replicate their effects).
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- Drops dead waiters (deadline passed) from the queue's head; the live head
-- or nil, and the clock if it had to be read (an empty queue needs none).
local function live_head(now)
  while true do
    local head = redis.call('LINDEX', KEYS[2], 0)
    if not head then return nil, now end
    now = now or now_ms()
    local deadline = redis.call('ZSCORE', KEYS[3], head)
    if deadline and tonumber(deadline) > now then return head, now end
    redis.call('LPOP', KEYS[2])
    redis.call('ZREM', KEYS[3], head)
  end
end
-- Wakes the first live waiter, and only it: one message on its client's channel.
local function wake_one(channel_prefix, name)
  local head = live_head(nil)
  if head then
    redis.call('PUBLISH', channel_prefix .. string.match(head, '^[^/]*'), head .. '\n' .. name)
  end
end
)lua";

// ARGV: 1 owner, 2 lease ms, 3 our waiter entry ('' = none), 4 waiter_ttl ms, 5 fair ('1' or '0')
constexpr std::string_view acquire = R"lua(
local held = redis.call('HMGET', KEYS[1], 'owner', 'last_token')
local holder = held[1]
-- Free, or already ours (a retry whose first reply was lost): we may take it...
local free = (not holder) or holder == ARGV[1]
-- ...unless fair and someone queued before us (dead heads dropped first).
local head, now = nil, nil
if free and not holder and ARGV[5] == '1' then
  head, now = live_head(nil)
  if head and head ~= ARGV[3] then free = false end
end
if free then
  -- One more than the last token while the key keeps it; once the key is
  -- gone, the server clock in us, which every earlier token of this name
  -- is behind (each was at most the clock when it was issued).
  local token
  if held[2] then
    token = string.format('%.0f', tonumber(held[2]) + 1)
  else
    local t = redis.call('TIME')
    token = string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2]))
  end
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'token', token, 'last_token', token)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  -- Leave the queue if we were in it.
  if ARGV[3] ~= '' and redis.call('ZREM', KEYS[3], ARGV[3]) == 1 then
    redis.call('LREM', KEYS[2], 0, ARGV[3])
  end
  return {1, token}
end
-- Busy: queue us, or refresh our deadline, so that a release wakes us.
if ARGV[3] ~= '' then
  now = now or now_ms()
  local ttl = tonumber(ARGV[4])
  if redis.call('ZADD', KEYS[3], now + ttl, ARGV[3]) == 1 then redis.call('RPUSH', KEYS[2], ARGV[3]) end
  -- The queue keys live as long as their latest deadline, no longer.
  for i = 2, 3 do
    if redis.call('PTTL', KEYS[i]) < ttl then redis.call('PEXPIRE', KEYS[i], ttl) end
  end
end
-- When to retry at the latest: the holder's lease end, or the head's deadline.
if holder then return {0, redis.call('PTTL', KEYS[1])} end
return {0, tonumber(redis.call('ZSCORE', KEYS[3], head)) - now}
)lua";

// ARGV: 1 owner, 2 token, 3 token_retention ms, 4 channel prefix, 5 lock name
constexpr std::string_view release = R"lua(
-- Ours only if both owner and token match: a stale release frees nothing.
local mine = redis.call('HMGET', KEYS[1], 'owner', 'token')
if mine[1] ~= ARGV[1] or mine[2] ~= ARGV[2] then return 0 end
-- Forget the holder; keep last_token for the retention window.
redis.call('HDEL', KEYS[1], 'owner', 'token')
redis.call('PEXPIRE', KEYS[1], ARGV[3])
wake_one(ARGV[4], ARGV[5])
return 1
)lua";

// KEYS[1] only. ARGV: 1 owner, 2 token, 3 lease ms
constexpr std::string_view renew = R"lua(
-- Extend only our own grant: gone or someone else's means lost.
local mine = redis.call('HMGET', KEYS[1], 'owner', 'token')
if mine[1] ~= ARGV[1] or mine[2] ~= ARGV[2] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
)lua";

// ARGV: 1 our waiter entry, 2 channel prefix, 3 lock name
constexpr std::string_view leave = R"lua(
if redis.call('ZREM', KEYS[3], ARGV[1]) == 0 then return 0 end
local was_head = redis.call('LINDEX', KEYS[2], 0) == ARGV[1]
redis.call('LREM', KEYS[2], 0, ARGV[1])
-- A head that gives up after its wake-up passes it on if the lock is free.
if was_head and redis.call('HEXISTS', KEYS[1], 'owner') == 0 then wake_one(ARGV[2], ARGV[3]) end
return 1
)lua";

// ARGV: 1 token_retention ms, 2 channel prefix, 3 lock name
constexpr std::string_view force_release = R"lua(
if redis.call('HEXISTS', KEYS[1], 'owner') == 0 then return 0 end
-- Drop the holder whoever it is; its renewals and release now fail (lost).
redis.call('HDEL', KEYS[1], 'owner', 'token')
redis.call('PEXPIRE', KEYS[1], ARGV[1])
wake_one(ARGV[2], ARGV[3])
return 1
)lua";

std::string with_prelude(std::string_view body) { return std::string(prelude) + std::string(body); }

}  // namespace

const std::string& script_text(Script script) {
  static const std::array<std::string, script_count> texts = {
      with_prelude(acquire), with_prelude(release), std::string(renew), with_prelude(leave),
      with_prelude(force_release)};
  return texts[static_cast<std::size_t>(script)];
}

std::string_view script_name(Script script) {
  static constexpr std::array<std::string_view, script_count> names = {"acquire", "release", "renew", "leave",
                                                                       "force_release"};
  return names[static_cast<std::size_t>(script)];
}

}  // namespace dlock::detail::redis
