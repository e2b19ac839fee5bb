#include "backends/redis/scripts.h"

#include <array>
#include <cctype>
#include <iterator>
#include <span>

namespace dlock::detail::redis {
namespace {

// Helpers the scripts share, each after those it calls. A script gets
// only the ones it uses (text()): defining a Lua function costs the server
// time at every call. Every redis.call costs about as much as the script's
// own start (~1.5 µs), so the paths taken without waiters make as few as
// they can.
struct Helper {
  std::string_view name;
  std::string_view text;
};

constexpr Helper helpers[] = {
    {"now_ms", R"lua(
-- The server's clock in ms (TIME is allowed: scripts replicate their effects).
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
)lua"},
    {"keep_for", R"lua(
-- Extends key k's life to at least ms from now (a missing key stays missing).
local function keep_for(k, ms)
  if redis.call('PTTL', k) < ms then redis.call('PEXPIRE', k, ms) end
end
)lua"},
    {"token_after", R"lua(
-- The fencing token after `last` (false or nil: none kept): the server
-- clock in us, or one more than `last` where that is ahead. Never behind
-- the clock, so a master that lacks the last tokens of its name (a replica
-- promoted before it had them, a server restarted from an older file)
-- still issues greater ones, given server clocks closer together than a
-- failover takes.
local function token_after(last)
  local t = redis.call('TIME')
  local token = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if last then token = math.max(token, tonumber(last) + 1) end
  return string.format('%.0f', token)
end
)lua"},
    {"next_token", R"lua(
-- The next fencing token of a name, kept in field last_token of hash k.
local function next_token(k)
  local token = token_after(redis.call('HGET', k, 'last_token'))
  redis.call('HSET', k, 'last_token', token)
  return token
end
)lua"},
    {"publish", R"lua(
-- One wake-up: a message on the waiter's client channel. An empty prefix
-- (redis+cluster) means the name's own channel "<key base>client:<client
-- id>", in this script's slot: SPUBLISH, heard on that shard only.
local function publish(channel_prefix, entry, tag)
  local client = string.match(entry, '^[^/]*')
  if channel_prefix == '' then
    redis.call('SPUBLISH', string.match(KEYS[1], '^(.*}:)') .. 'client:' .. client, entry .. '\n' .. tag)
  else
    redis.call('PUBLISH', channel_prefix .. client, entry .. '\n' .. tag)
  end
end
)lua"},
    {"live_head", R"lua(
-- Drops dead waiters (deadline passed) from the head of queue q (deadlines
-- in zset w; what they wait with in hash s, if given); the live head or
-- nil, and the clock if it had to be read.
local function live_head(q, w, now, s)
  while true do
    local head = redis.call('LINDEX', q, 0)
    if not head then return nil, now end
    now = now or now_ms()
    local deadline = redis.call('ZSCORE', w, head)
    if deadline and tonumber(deadline) > now then return head, now end
    redis.call('LPOP', q)
    redis.call('ZREM', w, head)
    if s then redis.call('HDEL', s, head, '!' .. head, '#' .. head) end
  end
end
)lua"},
    {"each_live", R"lua(
-- Calls visit(entry) on the live entries of queue q in order, dropping dead
-- ones, until visit returns false.
local function each_live(q, w, now, visit)
  local from = 0
  while true do
    local page = redis.call('LRANGE', q, from, from + 63)
    if #page == 0 then return end
    local deadlines = redis.call('ZMSCORE', w, unpack(page))
    for i, entry in ipairs(page) do
      if deadlines[i] and tonumber(deadlines[i]) > now then
        if not visit(entry) then return end
        from = from + 1
      else
        redis.call('LREM', q, 1, entry)
        redis.call('ZREM', w, entry)
      end
    end
  end
end
)lua"},
    {"wake_first", R"lua(
-- Wakes the first n live waiters of queue q: one message each. Whether
-- there was one to wake.
local function wake_first(q, w, n, channel_prefix, tag)
  if n <= 0 then return false end
  if n == 1 then
    local head = live_head(q, w, nil, nil)
    if head then publish(channel_prefix, head, tag) end
    return head ~= nil
  end
  local woken = false
  each_live(q, w, now_ms(), function(entry)
    publish(channel_prefix, entry, tag)
    woken = true
    n = n - 1
    return n > 0
  end)
  return woken
end
)lua"},
    {"enqueue", R"lua(
-- Queues entry at the back of queue q, or refreshes its deadline; the queue
-- keys live as long as their latest deadline, no longer. A new entry's
-- `info` (what it waits with) goes into hash s, if given, and its wait's
-- secret (if not '') into field '#' .. entry: only a handover carries it.
local function enqueue(q, w, entry, ttl, now, s, info, secret)
  if redis.call('ZADD', w, now + ttl, entry) == 1 then
    redis.call('RPUSH', q, entry)
    if s then
      if secret and secret ~= '' then
        redis.call('HSET', s, entry, info, '#' .. entry, secret)
      else
        redis.call('HSET', s, entry, info)
      end
    end
  end
  keep_for(q, ttl)
  keep_for(w, ttl)
  if s then keep_for(s, ttl) end
end
)lua"},
    {"dequeue", R"lua(
-- Takes entry out of queue q (and hash s) if it is there; whether it was
-- the live head.
local function dequeue(q, w, entry, s)
  if entry == '' or redis.call('ZREM', w, entry) == 0 then return false end
  local was_head = redis.call('LINDEX', q, 0) == entry
  redis.call('LREM', q, 0, entry)
  if s then redis.call('HDEL', s, entry, '!' .. entry, '#' .. entry) end
  return was_head
end
)lua"},
    {"waiting", R"lua(
-- What the waiter `entry` waits with (hash s): since when (server ms), its
-- lease and fixed flag, how long it lets others barge (ms), its data.
-- (Field '!' .. entry: a release woke it while others could still barge.)
local function waiting(s, entry)
  local v = redis.call('HGET', s, entry)
  if not v then return nil end
  local since, lease, fixed, bound, data = string.match(v, '^(%d+),(%d+),(%d),(%d+),(.*)$')
  return tonumber(since), lease, fixed, tonumber(bound), data
end
)lua"},
    {"latch_count", R"lua(
-- A latch's count (a string), the latch made with `initial` if missing.
local function latch_count(k, initial)
  local count = redis.call('HGET', k, 'count')
  if count then return count end
  redis.call('HSET', k, 'count', initial)
  return initial
end
)lua"},
    {"watch", R"lua(
-- Watchers (zset k: entry -> deadline) wait for one event and are all woken
-- by it; dead ones are dropped when someone watches.
local function watch(k, entry, ttl, now)
  redis.call('ZREMRANGEBYSCORE', k, '-inf', now)
  redis.call('ZADD', k, now + ttl, entry)
  keep_for(k, ttl)
end
)lua"},
    {"wake_watchers", R"lua(
local function wake_watchers(k, channel_prefix, tag)
  for _, entry in ipairs(redis.call('ZRANGEBYSCORE', k, '(' .. now_ms(), '+inf')) do
    publish(channel_prefix, entry, tag)
  end
  redis.call('DEL', k)
end
)lua"},
    {"prune", R"lua(
-- Leases as a zset z (member -> expiry ms) with their tokens in hash t:
-- drops the expired ones (in pages: unpack has a stack limit).
local function prune(z, t, now)
  while true do
    local gone = redis.call('ZRANGEBYSCORE', z, '-inf', now, 'LIMIT', 0, 1000)
    if #gone == 0 then return end
    redis.call('ZREM', z, unpack(gone))
    redis.call('HDEL', t, unpack(gone))
  end
end
)lua"},
};

// --- Mutex and election --------------------------------------------------
// KEYS: 1 lock, 2 queue, 3 waiters, 4 since (entry -> what it waits with,
// see waiting()); elections also 5 observers.
//
// Not fair, a free lock goes to whoever asks first, unless the live head of
// the queue has waited longer than its max_barging_wait: then it goes to the
// head only, and a release hands it over directly (the head's wake-up
// carries the token: no round trip). Fair is a bound of 0. A lock handed
// to a waiter whose lease is a watchdog's gets min(lease, waiter_ttl) at
// first (ARGV of the release), so a waiter that died just before gets it
// for that long at most; its first renewal comes early (core).

// ARGV: 1 owner, 2 lease ms, 3 our waiter entry ('' = none), 4 waiter_ttl ms,
// 5 max_barging_wait ms ('0' = fair), 6 '1' if the lease is fixed, 7 the
// wait's secret ('' = none: a release wakes us without handing over);
// elections also 8 data, 9 channel prefix, 10 observer tag
constexpr std::string_view acquire = R"lua(
local held = redis.call('HMGET', KEYS[1], 'owner', 'last_token')
local holder = held[1]
-- Free, or already ours (a retry whose first reply was lost, or a handover
-- whose message we missed): we may take it...
local free = (not holder) or holder == ARGV[1]
-- ...unless someone queued before us goes first: everyone if we are fair,
-- else a head that has waited longer than it lets others barge.
local head, now = nil, nil
if free and not holder then
  head, now = live_head(KEYS[2], KEYS[3], nil, KEYS[4])
  if head and head ~= ARGV[3] then
    if ARGV[5] == '0' then
      free = false
    else
      local since, _, _, bound = waiting(KEYS[4], head)
      if since and now - since >= bound then free = false end
    end
  end
end
if free then
  local token = token_after(held[2])
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'token', token, 'last_token', token)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  dequeue(KEYS[2], KEYS[3], ARGV[3], KEYS[4])
  -- An election: the leader's id, and every observer told.
  if KEYS[5] and holder ~= ARGV[1] then
    redis.call('HSET', KEYS[1], 'data', ARGV[8])
    wake_watchers(KEYS[5], ARGV[9], ARGV[10])
  end
  return {1, token}
end
-- Busy: queue us, or refresh our deadline, so that a release wakes us.
now = now or now_ms()
local at = string.format('%.0f', now)
if ARGV[3] ~= '' then
  enqueue(KEYS[2], KEYS[3], ARGV[3], tonumber(ARGV[4]), now, KEYS[4],
          at .. ',' .. ARGV[2] .. ',' .. ARGV[6] .. ',' .. ARGV[5] .. ',' .. (ARGV[8] or ''), ARGV[7])
end
-- A head a release woke (release), beaten to the lock since, is not woken
-- again while others may still barge: it asks again when its bound ends
-- (from then on a release hands it the lock), or every 5 ms until then,
-- so a lock its barger left free waits for it 5 ms at most.
local ask = nil
if ARGV[3] ~= '' and redis.call('HEXISTS', KEYS[4], '!' .. ARGV[3]) == 1 then
  local since, _, _, bound = waiting(KEYS[4], ARGV[3])
  if since and since + bound > now then ask = string.format('%.0f', math.min(since + bound - now, 5)) end
end
-- When to retry at the latest (the holder's lease end, or the head's
-- deadline), the server's clock (a handover's validity is computed from
-- it), and when to ask again if the bound above says so.
if holder then return {0, redis.call('PTTL', KEYS[1]), at, ask} end
return {0, tonumber(redis.call('ZSCORE', KEYS[3], head)) - now, at, ask}
)lua";

// ARGV: 1 owner, 2 token, 3 token_retention ms, 4 channel prefix, 5 lock name,
// 6 waiter_ttl ms; elections also 7 observer tag
constexpr std::string_view release = R"lua(
-- Ours only if both owner and token match: a stale release frees nothing.
-- (Our owner under a newer token: this thread took it again on another
-- connection before this release, sent without waiting, arrived: moot.)
local mine = redis.call('HMGET', KEYS[1], 'owner', 'token', 'last_token')
if mine[1] ~= ARGV[1] or mine[2] ~= ARGV[2] then
  if mine[1] == ARGV[1] then return 2 end
  return 0
end
local head, now = live_head(KEYS[2], KEYS[3], nil, KEYS[4])
if head then
  local since, lease, fixed, bound, data = waiting(KEYS[4], head)
  if since and now - since >= bound then
    -- The head has waited long enough: it holds the lock from now on, and
    -- its wake-up says so (token, server time of the handover), with the
    -- wait's secret, which only the waiter and the keys know: a message
    -- without it is a mere wake-up (the waiter asks, and finds it holds).
    if fixed == '0' then lease = math.min(tonumber(lease), tonumber(ARGV[6])) end
    local token = token_after(mine[3])
    redis.call('HSET', KEYS[1], 'owner', string.match(head, '^[^/]*/([^/]*)'), 'token', token, 'last_token', token)
    redis.call('PEXPIRE', KEYS[1], lease)
    local secret = redis.call('HGET', KEYS[4], '#' .. head)
    dequeue(KEYS[2], KEYS[3], head, KEYS[4])
    local grant = ARGV[5] .. '\n' .. token .. '\n' .. string.format('%.0f', now) .. '\n' .. lease
    if secret then grant = grant .. '\n' .. secret end
    publish(ARGV[4], head, grant)
    if KEYS[5] then
      redis.call('HSET', KEYS[1], 'data', data)
      wake_watchers(KEYS[5], ARGV[4], ARGV[7])
    end
    return 1
  end
end
-- Forget the holder; keep last_token for the retention window.
redis.call('HDEL', KEYS[1], 'owner', 'token', 'data')
redis.call('PEXPIRE', KEYS[1], ARGV[3])
-- An election's observers hear of the next leader when it takes over;
-- only if nobody is in line are they told that nobody leads. The head is
-- woken once while others may barge: woken again after losing to one it
-- would only lose again (it comes back at its bound, acquire).
if head then
  if redis.call('HSETNX', KEYS[4], '!' .. head, '1') == 1 then publish(ARGV[4], head, ARGV[5]) end
elseif KEYS[5] then
  wake_watchers(KEYS[5], ARGV[4], ARGV[7])
end
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
-- A head that gives up after its wake-up passes it on if the lock is free.
if dequeue(KEYS[2], KEYS[3], ARGV[1], KEYS[4]) and redis.call('HEXISTS', KEYS[1], 'owner') == 0 then
  local head = live_head(KEYS[2], KEYS[3], nil, KEYS[4])
  if head then publish(ARGV[2], head, ARGV[3]) end
end
return 1
)lua";

// ARGV: 1 token_retention ms, 2 channel prefix, 3 lock name; elections also 4 observer tag
constexpr std::string_view force_release = R"lua(
if redis.call('HEXISTS', KEYS[1], 'owner') == 0 then return 0 end
-- Drop the holder whoever it is; its renewals and release now fail (lost).
redis.call('HDEL', KEYS[1], 'owner', 'token', 'data')
redis.call('PEXPIRE', KEYS[1], ARGV[1])
local head = live_head(KEYS[2], KEYS[3], nil, KEYS[4])
if head then
  publish(ARGV[2], head, ARGV[3])
elseif KEYS[5] then
  wake_watchers(KEYS[5], ARGV[2], ARGV[4])
end
return 1
)lua";

// KEYS: 1 lock, 2 observers. ARGV: 1 our watcher entry ('' = don't watch), 2 its ttl ms
constexpr std::string_view observe = R"lua(
local held = redis.call('HMGET', KEYS[1], 'owner', 'data')
if ARGV[1] ~= '' then watch(KEYS[2], ARGV[1], tonumber(ARGV[2]), now_ms()) end
if held[1] then return {1, held[2] or ''} end
return {0}
)lua";

// --- SharedMutex ----------------------------------------------------------
// A writer waits for no writer and no reader; a reader for no writer but
// itself (a writer may read too) and no live writer queued before it (or
// anywhere, if it is not queued yet): so a waiting writer holds back the
// readers that come after it. Queue entries' owners end in '|w' or '|r'.

// Whether a live queue entry before `entry` (every one, if entry is not
// queued) blocks a `mode` caller: any, for a fair writer; a writer, for a reader.
constexpr std::string_view rw_prelude = R"lua(
local function queued_before(entry, mode, fair, now)
  local blocked = false
  each_live(KEYS[4], KEYS[5], now, function(e)
    if e == entry then return false end
    if (mode == 'w' and fair) or string.find(e, '|w/', 1, true) ~= nil then blocked = true return false end
    return true
  end)
  return blocked
end
-- Wakes whoever may go now that a hold ended: the writer at the head if
-- nobody holds, or the readers before the first queued writer if no writer
-- holds; one message each.
local function wake_rw(now, channel_prefix, tag)
  local w = redis.call('HMGET', KEYS[1], 'writer', 'wexp')
  if w[1] and tonumber(w[2]) > now then return end
  local readers = redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf')
  local first = true
  each_live(KEYS[4], KEYS[5], now, function(e)
    local writer = string.find(e, '|w/', 1, true) ~= nil
    if writer then
      if first and readers == 0 then publish(channel_prefix, e, tag) end
      return false
    end
    publish(channel_prefix, e, tag)
    first = false
    return true
  end)
end
)lua";

// ARGV: 1 owner, 2 lease ms, 3 our waiter entry ('' = none), 4 waiter_ttl ms,
// 5 max_barging_wait ms ('0' = fair; other bounds are not kept here: not fair), 6 mode ('w' or 'r'),
// 7 token_retention ms
constexpr std::string_view rw_acquire = R"lua(
local now = now_ms()
local owner, lease, entry, mode = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[6]
local w = redis.call('HMGET', KEYS[1], 'writer', 'wtoken', 'wexp')
local writer = w[1]
if writer and tonumber(w[3]) <= now then writer = nil end
prune(KEYS[2], KEYS[3], now)
-- Ours already: a retry whose first reply was lost.
if mode == 'w' and writer == owner then return {1, w[2]} end
if mode == 'r' then
  local t = redis.call('HGET', KEYS[3], owner)
  if t then return {1, t} end
end
local free
if mode == 'w' then
  free = not writer and redis.call('ZCARD', KEYS[2]) == 0 and
         not (ARGV[5] == '0' and queued_before(entry, 'w', true, now))
else
  free = writer == owner or (not writer and not queued_before(entry, 'r', false, now))
end
if free then
  local token = next_token(KEYS[1])
  if mode == 'w' then
    redis.call('HSET', KEYS[1], 'writer', owner, 'wtoken', token, 'wexp', now + lease)
  else
    redis.call('ZADD', KEYS[2], now + lease, owner)
    redis.call('HSET', KEYS[3], owner, token)
  end
  local life = lease + tonumber(ARGV[7])
  for i = 1, 3 do keep_for(KEYS[i], life) end
  dequeue(KEYS[4], KEYS[5], entry)
  return {1, token}
end
if entry ~= '' then enqueue(KEYS[4], KEYS[5], entry, tonumber(ARGV[4]), now) end
-- When to retry at the latest: the writer's or the first reader's lease end.
if writer then return {0, tonumber(w[3]) - now} end
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if first[2] then return {0, tonumber(first[2]) - now} end
return {0, -1}
)lua";

// ARGV: 1 owner, 2 token, 3 mode, 4 channel prefix, 5 lock name
constexpr std::string_view rw_release = R"lua(
local now = now_ms()
local owner, token = ARGV[1], ARGV[2]
if ARGV[3] == 'w' then
  local w = redis.call('HMGET', KEYS[1], 'writer', 'wtoken', 'wexp')
  if w[1] ~= owner or w[2] ~= token then return 0 end
  redis.call('HDEL', KEYS[1], 'writer', 'wtoken', 'wexp')
  if tonumber(w[3]) <= now then return 0 end
else
  if redis.call('HGET', KEYS[3], owner) ~= token then return 0 end
  local expires = redis.call('ZSCORE', KEYS[2], owner)
  redis.call('ZREM', KEYS[2], owner)
  redis.call('HDEL', KEYS[3], owner)
  if not expires or tonumber(expires) <= now then return 0 end
end
wake_rw(now, ARGV[4], ARGV[5])
return 1
)lua";

// KEYS 1-3. ARGV: 1 owner, 2 token, 3 lease ms, 4 mode, 5 token_retention ms
constexpr std::string_view rw_renew = R"lua(
local now = now_ms()
local owner, lease = ARGV[1], tonumber(ARGV[3])
if ARGV[4] == 'w' then
  local w = redis.call('HMGET', KEYS[1], 'writer', 'wtoken', 'wexp')
  if w[1] ~= owner or w[2] ~= ARGV[2] or tonumber(w[3]) <= now then return 0 end
  redis.call('HSET', KEYS[1], 'wexp', now + lease)
else
  if redis.call('HGET', KEYS[3], owner) ~= ARGV[2] then return 0 end
  local expires = redis.call('ZSCORE', KEYS[2], owner)
  if not expires or tonumber(expires) <= now then return 0 end
  redis.call('ZADD', KEYS[2], 'XX', now + lease, owner)
end
local life = lease + tonumber(ARGV[5])
for i = 1, 3 do keep_for(KEYS[i], life) end
return 1
)lua";

// ARGV: 1 our waiter entry, 2 channel prefix, 3 lock name
constexpr std::string_view rw_leave = R"lua(
-- Whoever we may have been keeping back (or passed a wake-up to) may go now.
if dequeue(KEYS[4], KEYS[5], ARGV[1]) or string.find(ARGV[1], '|w/', 1, true) ~= nil then
  wake_rw(now_ms(), ARGV[2], ARGV[3])
end
return 1
)lua";

// ARGV: 1 channel prefix, 2 lock name
constexpr std::string_view rw_force = R"lua(
local now = now_ms()
local had = redis.call('HEXISTS', KEYS[1], 'writer') == 1 or redis.call('ZCARD', KEYS[2]) > 0
redis.call('HDEL', KEYS[1], 'writer', 'wtoken', 'wexp')
redis.call('DEL', KEYS[2], KEYS[3])
wake_rw(now, ARGV[1], ARGV[2])
if had then return 1 end
return 0
)lua";

// --- Semaphore --------------------------------------------------------------

// ARGV: 1 owner, 2 lease ms, 3 our waiter entry ('' = none), 4 waiter_ttl ms,
// 5 max_barging_wait ms ('0' = fair; other bounds are not kept here: not fair), 6 permits declared
// by the caller, 7 token_retention ms
constexpr std::string_view permit_acquire = R"lua(
local declared = redis.call('HGET', KEYS[1], 'declared')
if declared and declared ~= ARGV[6] then return {-1, declared} end
local now = now_ms()
local owner, lease, entry = ARGV[1], tonumber(ARGV[2]), ARGV[3]
prune(KEYS[2], KEYS[3], now)
-- Ours already: a retry whose first reply was lost.
local mine = redis.call('HGET', KEYS[3], owner)
if mine then return {1, mine} end
local free = redis.call('ZCARD', KEYS[2]) < tonumber(ARGV[6])
if free and ARGV[5] == '0' then
  local head = live_head(KEYS[4], KEYS[5], now)
  if head and head ~= entry then free = false end
end
if free then
  local token = next_token(KEYS[1])
  redis.call('HSET', KEYS[1], 'declared', ARGV[6])
  redis.call('ZADD', KEYS[2], now + lease, owner)
  redis.call('HSET', KEYS[3], owner, token)
  local life = lease + tonumber(ARGV[7])
  for i = 1, 3 do keep_for(KEYS[i], life) end
  dequeue(KEYS[4], KEYS[5], entry)
  return {1, token}
end
if entry ~= '' then enqueue(KEYS[4], KEYS[5], entry, tonumber(ARGV[4]), now) end
-- When to retry at the latest: when the first permit out expires.
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if first[2] then return {0, tonumber(first[2]) - now} end
return {0, -1}
)lua";

// Wakes as many queued waiters as there are permits free (a waiter woken
// before may not have taken its permit yet).
constexpr std::string_view permit_prelude = R"lua(
local function wake_for_free(now, channel_prefix, tag)
  local declared = tonumber(redis.call('HGET', KEYS[1], 'declared') or '0')
  wake_first(KEYS[4], KEYS[5], declared - redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf'), channel_prefix, tag)
end
)lua";

// ARGV: 1 owner, 2 token, 3 channel prefix, 4 semaphore name
constexpr std::string_view permit_release = R"lua(
if redis.call('HGET', KEYS[3], ARGV[1]) ~= ARGV[2] then return 0 end
local now = now_ms()
local expires = redis.call('ZSCORE', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
if not expires or tonumber(expires) <= now then return 0 end
wake_for_free(now, ARGV[3], ARGV[4])
return 1
)lua";

// KEYS 1-3. ARGV: 1 owner, 2 token, 3 lease ms, 4 token_retention ms
constexpr std::string_view permit_renew = R"lua(
if redis.call('HGET', KEYS[3], ARGV[1]) ~= ARGV[2] then return 0 end
local now = now_ms()
local expires = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not expires or tonumber(expires) <= now then return 0 end
redis.call('ZADD', KEYS[2], 'XX', now + tonumber(ARGV[3]), ARGV[1])
local life = tonumber(ARGV[3]) + tonumber(ARGV[4])
for i = 1, 3 do keep_for(KEYS[i], life) end
return 1
)lua";

// ARGV: 1 our waiter entry, 2 channel prefix, 3 semaphore name
constexpr std::string_view permit_leave = R"lua(
if dequeue(KEYS[4], KEYS[5], ARGV[1]) then wake_for_free(now_ms(), ARGV[2], ARGV[3]) end
return 1
)lua";

// ARGV: 1 channel prefix, 2 semaphore name
constexpr std::string_view permit_force = R"lua(
local had = redis.call('ZCARD', KEYS[2]) > 0
redis.call('DEL', KEYS[2], KEYS[3])
wake_for_free(now_ms(), ARGV[1], ARGV[2])
if had then return 1 end
return 0
)lua";

// --- Counter ----------------------------------------------------------------
// Values are decimal strings handled by the server's own 64-bit arithmetic
// (HINCRBY) or compared as strings: Lua's numbers are doubles. Width '4'
// (int32) or '8' (int64), fixed when the counter is created.

constexpr std::string_view counter_prelude = R"lua(
local function fits(width, value)
  if width == '8' then return true end
  local n = tonumber(value)
  return n >= -2147483648 and n <= 2147483647
end
)lua";

// ARGV: 1 value, 2 width if missing
constexpr std::string_view counter_store = R"lua(
local width = redis.call('HGET', KEYS[1], 'width') or ARGV[2]
if not fits(width, ARGV[1]) then return {-1, width} end
redis.call('HSET', KEYS[1], 'value', ARGV[1], 'width', width)
return {1}
)lua";

// ARGV: 1 delta, 2 width if missing
constexpr std::string_view counter_add = R"lua(
local held = redis.call('HMGET', KEYS[1], 'value', 'width')
local before, width = held[1] or '0', held[2] or ARGV[2]
-- An int32's sum is exact in a double near the bounds, where it matters.
if not fits(width, tonumber(before) + tonumber(ARGV[1])) then return {-1, width, before} end
local added = redis.pcall('HINCRBY', KEYS[1], 'value', ARGV[1])
if type(added) == 'table' and added.err then
  if string.find(added.err, 'overflow') then return {-1, width, before} end
  return added
end
if not held[2] then redis.call('HSET', KEYS[1], 'width', width) end
return {1, before}
)lua";

// ARGV: 1 expected, 2 desired, 3 width if missing
constexpr std::string_view counter_cas = R"lua(
local held = redis.call('HMGET', KEYS[1], 'value', 'width')
local seen, width = held[1] or '0', held[2] or ARGV[3]
if seen ~= ARGV[1] then return {0, seen} end
if not fits(width, ARGV[2]) then return {-1, width} end
redis.call('HSET', KEYS[1], 'value', ARGV[2], 'width', width)
return {1}
)lua";

// --- Latch -----------------------------------------------------------------

// ARGV: 1 initial count, 2 our watcher entry ('' = don't watch), 3 its ttl ms
constexpr std::string_view latch_read = R"lua(
local count = latch_count(KEYS[1], ARGV[1])
if count ~= '0' and ARGV[2] ~= '' then watch(KEYS[2], ARGV[2], tonumber(ARGV[3]), now_ms()) end
return count
)lua";

// ARGV: 1 initial count, 2 minus n ('-3'), 3 channel prefix, 4 tag
constexpr std::string_view latch_count_down = R"lua(
local count = latch_count(KEYS[1], ARGV[1])
if count == '0' then return '0' end
local after = redis.call('HINCRBY', KEYS[1], 'count', ARGV[2])
if after > 0 then return string.format('%.0f', after) end
redis.call('HSET', KEYS[1], 'count', '0')
wake_watchers(KEYS[2], ARGV[3], ARGV[4])
return '0'
)lua";

// --- Barrier -----------------------------------------------------------------
// Members are leased entries (member -> expiry ms); the state hash says
// whether this round is open; members that have called leave are in the
// left set. The round ends (every key deleted) when every live member has left.

constexpr std::string_view barrier_prelude = R"lua(
local function shut_if_all_left(channel_prefix, tag)
  local members = redis.call('ZCARD', KEYS[2])
  if members > 0 and redis.call('ZINTERCARD', 2, KEYS[2], KEYS[3]) < members then return false end
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
  wake_watchers(KEYS[4], channel_prefix, tag)
  return true
end
)lua";

// ARGV: 1 member, 2 lease ms
constexpr std::string_view barrier_join = R"lua(
local now = now_ms()
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
keep_for(KEYS[2], tonumber(ARGV[2]))
return 1
)lua";

// ARGV: 1 member, 2 parties, 3 our watcher entry ('' = don't watch), 4 its ttl ms,
// 5 channel prefix, 6 tag
constexpr std::string_view barrier_enter = R"lua(
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('HGET', KEYS[1], 'open') then return 1 end
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then return -1 end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], 'open', '1')
  redis.call('PEXPIRE', KEYS[1], redis.call('PTTL', KEYS[2]))
  wake_watchers(KEYS[4], ARGV[5], ARGV[6])
  return 1
end
if ARGV[3] ~= '' then watch(KEYS[4], ARGV[3], tonumber(ARGV[4]), now) end
return 0
)lua";

// ARGV: 1 member, 2 our watcher entry ('' = don't watch), 3 its ttl ms, 4 channel prefix, 5 tag
constexpr std::string_view barrier_leave = R"lua(
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
-- Gone from the members: the round is over (or we are out).
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then return 1 end
redis.call('SADD', KEYS[3], ARGV[1])
keep_for(KEYS[3], redis.call('PTTL', KEYS[2]))
if shut_if_all_left(ARGV[4], ARGV[5]) then return 1 end
if ARGV[2] ~= '' then watch(KEYS[4], ARGV[2], tonumber(ARGV[3]), now) end
return 0
)lua";

// ARGV: 1 member, 2 channel prefix, 3 tag
constexpr std::string_view barrier_remove = R"lua(
local was_in = redis.call('ZREM', KEYS[2], ARGV[1]) == 1
redis.call('SREM', KEYS[3], ARGV[1])
-- The last one out of an open round shuts it, as leave would.
if was_in and redis.call('HGET', KEYS[1], 'open') then shut_if_all_left(ARGV[2], ARGV[3]) end
return 1
)lua";

// KEYS 1-2. ARGV: 1 member, 2 lease ms
constexpr std::string_view member_renew = R"lua(
local now = now_ms()
local expires = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not expires then
  -- The round is over (every key gone): nothing to keep alive, nothing lost.
  if redis.call('EXISTS', KEYS[2]) == 0 then return 1 end
  return 0
end
if tonumber(expires) <= now then return 0 end
redis.call('ZADD', KEYS[2], 'XX', now + tonumber(ARGV[2]), ARGV[1])
keep_for(KEYS[2], tonumber(ARGV[2]))
keep_for(KEYS[1], tonumber(ARGV[2]))
return 1
)lua";

// Per hold i: KEYS 3i-2..3i, ARGV 3i-2 kind ('m' mutex or leadership, 'w'
// writer, 'r' reader, 'p' permit, 'b' barrier member), 3i-1 owner, 3i token.
// The same owner+token checks as the renew scripts, without extending.
constexpr std::string_view revalidate = R"lua(
local now = now_ms()
local out = {}
for i = 1, #ARGV / 3 do
  local kind, owner, token = ARGV[3 * i - 2], ARGV[3 * i - 1], ARGV[3 * i]
  local k1, k2, k3 = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
  local ok = false
  if kind == 'm' then
    local mine = redis.call('HMGET', k1, 'owner', 'token')
    ok = mine[1] == owner and mine[2] == token
  elseif kind == 'w' then
    local w = redis.call('HMGET', k1, 'writer', 'wtoken', 'wexp')
    ok = w[1] == owner and w[2] == token and tonumber(w[3]) > now
  elseif kind == 'b' then
    local expires = redis.call('ZSCORE', k2, owner)
    ok = (expires and tonumber(expires) > now) or redis.call('EXISTS', k2) == 0
  else
    local expires = redis.call('ZSCORE', k2, owner)
    ok = redis.call('HGET', k3, owner) == token and expires ~= false and tonumber(expires) > now
  end
  out[i] = ok and 1 or 0
end
return out
)lua";

// Every script: its name (for messages) and its parts (a family's prelude,
// then its own body), in Script's order.
struct Entry {
  Script script;
  std::string_view name;
  std::array<std::string_view, 2> parts;  // an empty second part: none
};

constexpr Entry table[] = {
    {Script::acquire, "acquire", {acquire}},
    {Script::release, "release", {release}},
    {Script::renew, "renew", {renew}},
    {Script::leave, "leave", {leave}},
    {Script::force_release, "force_release", {force_release}},
    {Script::observe, "observe", {observe}},
    {Script::rw_acquire, "rw_acquire", {rw_prelude, rw_acquire}},
    {Script::rw_release, "rw_release", {rw_prelude, rw_release}},
    {Script::rw_renew, "rw_renew", {rw_renew}},
    {Script::rw_leave, "rw_leave", {rw_prelude, rw_leave}},
    {Script::rw_force, "rw_force", {rw_prelude, rw_force}},
    {Script::permit_acquire, "permit_acquire", {permit_acquire}},
    {Script::permit_release, "permit_release", {permit_prelude, permit_release}},
    {Script::permit_renew, "permit_renew", {permit_renew}},
    {Script::permit_leave, "permit_leave", {permit_prelude, permit_leave}},
    {Script::permit_force, "permit_force", {permit_prelude, permit_force}},
    {Script::counter_store, "counter_store", {counter_prelude, counter_store}},
    {Script::counter_add, "counter_add", {counter_prelude, counter_add}},
    {Script::counter_cas, "counter_cas", {counter_prelude, counter_cas}},
    {Script::latch_read, "latch_read", {latch_read}},
    {Script::latch_count_down, "latch_count_down", {latch_count_down}},
    {Script::barrier_join, "barrier_join", {barrier_join}},
    {Script::barrier_enter, "barrier_enter", {barrier_prelude, barrier_enter}},
    {Script::barrier_leave, "barrier_leave", {barrier_prelude, barrier_leave}},
    {Script::barrier_remove, "barrier_remove", {barrier_prelude, barrier_remove}},
    {Script::member_renew, "member_renew", {member_renew}},
    {Script::revalidate, "revalidate", {revalidate}},
};

constexpr bool in_script_order() {
  if (std::size(table) != script_count) return false;
  for (std::size_t i = 0; i < std::size(table); ++i)
    if (table[i].script != static_cast<Script>(i)) return false;
  return true;
}
static_assert(in_script_order(), "one entry per Script, in the enum's order");

// The parts of a script, after the helpers they call (directly or through
// another helper).
std::string text(std::span<const std::string_view> parts) {
  std::string body;
  for (auto part : parts) body += part;
  constexpr std::size_t count = std::size(helpers);
  std::array<bool, count> needed{};
  auto calls = [](std::string_view code, std::string_view name) {
    for (auto at = code.find(name); at != std::string_view::npos; at = code.find(name, at + 1)) {
      const bool starts = at == 0 || !(std::isalnum(static_cast<unsigned char>(code[at - 1])) || code[at - 1] == '_');
      if (starts && code.substr(at + name.size(), 1) == "(") return true;
    }
    return false;
  };
  // Later helpers only call earlier ones: one pass from the end.
  for (std::size_t i = count; i-- > 0;) {
    needed[i] = calls(body, helpers[i].name);
    for (std::size_t j = i + 1; j < count && !needed[i]; ++j)
      needed[i] = needed[j] && calls(helpers[j].text, helpers[i].name);
  }
  std::string out;
  for (std::size_t i = 0; i < count; ++i)
    if (needed[i]) out += helpers[i].text;
  return out + body;
}

}  // namespace

const std::string& script_text(Script script) {
  static const auto texts = [] {
    std::array<std::string, script_count> out;
    for (const Entry& e : table) {
      const std::size_t parts = e.parts[1].empty() ? 1 : 2;
      out[static_cast<std::size_t>(e.script)] = text(std::span(e.parts.data(), parts));
    }
    return out;
  }();
  return texts[static_cast<std::size_t>(script)];
}

std::string_view script_name(Script script) { return table[static_cast<std::size_t>(script)].name; }

}  // namespace dlock::detail::redis
