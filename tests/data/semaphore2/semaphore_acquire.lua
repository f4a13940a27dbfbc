-- Take k permits, or wait in line for them.
-- KEYS as in the prelude, then KEYS[7] lock hash, KEYS[8] readers and KEYS[9] the fair line's
-- places of a Lock or RwLock of this name (lock_keys.hpp): one name is one resource, looked at only when the semaphore has nothing
-- on the server (no permit, nobody in line), so a busy semaphore pays nothing for it.
-- ARGV[1] permit id (ends '#k')   ARGV[2] k   ARGV[3] lease ms   ARGV[4] the limit, set if the
-- semaphore has none yet   ARGV[5] 'try' (never queue) or 'wait'   ARGV[6] waiter lease ms
-- ARGV[7] retention ms   ARGV[8] 'set': when the semaphore has another limit, set ARGV[4]
-- (as semaphore_set_limit.lua) instead of refusing
-- Fairness: strict FIFO. A request is granted only when no earlier waiter is still in line and
-- its k permits are free; 'try' requests do not jump the line either.
-- Returns {1, limit} granted (also for a resent copy of a granted request, and for a waiter
-- granted directly that asks: either way its lease is now + ARGV[3] at least); {0, wake ms} not
-- granted ('wait': in line, its place kept for the waiter lease; wake ms: when a lease or a place
-- runs out next); {-2} the id was released, expired or given up: it never grants;
-- {-3, limit} k is more than the limit. Error replies, before any write but the pruning:
-- "DLOCK_KIND ..." the name is held as a Lock or an RwLock; "DLOCK_LIMIT ..." a new request whose
-- limit (ARGV[4]) is not the semaphore's (a waiter already in line is not asked again: a limit
-- changed by set_limit while it waits is the one it waits under).
local now = now_ms()
local id, k = ARGV[1], tonumber(ARGV[2])
local lease, waiter_lease, retention = tonumber(ARGV[3]), tonumber(ARGV[6]), tonumber(ARGV[7])
prune(now, retention)
if redis.call('EXISTS', KEYS[1], KEYS[3]) == 0 and redis.call('EXISTS', KEYS[7], KEYS[8], KEYS[9]) > 0 then
  -- The lock hash lives exactly as long as its lease; readers and places in a fair lock's line
  -- may have expired in their sets. A live place is a lock too: its waiter may be granted the
  -- lock at its next refresh, whoever else took the free name meanwhile.
  local lock_live = redis.call('EXISTS', KEYS[7]) == 1 or redis.call('ZCOUNT', KEYS[9], '(' .. now, '+inf') > 0
  if lock_live or redis.call('ZCOUNT', KEYS[8], '(' .. now, '+inf') > 0 then
    local what = 'a lock'
    if not lock_live then what = 'a read-write lock (readers hold it)' end
    return redis.error_reply('DLOCK_KIND the name is held as ' .. what .. '; take it as one, or use another name')
  end
end
local asked = tonumber(ARGV[4])
local limit = tonumber(redis.call('HGET', KEYS[2], 'limit'))
if limit and limit ~= asked and not redis.call('ZSCORE', KEYS[1], id) and not redis.call('ZRANK', KEYS[3], id) then
  if ARGV[8] ~= 'set' then
    return redis.error_reply('DLOCK_LIMIT the semaphore\'s limit is ' .. limit .. ', not ' .. asked ..
                             '; ask with its limit, or set the limit')
  end
  redis.call('HSET', KEYS[2], 'limit', asked)
  publish(KEYS[6], 'limit')
  limit = asked
elseif not limit then
  redis.call('HSET', KEYS[2], 'limit', asked)
  limit = asked
end
-- The state lives as long as what it counts: a grant's lease, or a waiter's place (below).
live_for(KEYS[2], lease + retention)
if redis.call('ZSCORE', KEYS[1], id) then
  -- Granted already: a resent copy, or a waiter granted directly that missed
  -- its notice (a subscriber reconnect) and asks. Its client counts the full
  -- lease from this request's first send, so the server keeps it that long.
  redis.call('ZADD', KEYS[1], 'XX', 'GT', now + lease, id)
  live_for(KEYS[1], lease + retention)
  return {1, limit}
end
if redis.call('ZSCORE', KEYS[5], id) or redis.call('ZSCORE', KEYS[5], '~' .. id) then return {-2} end
local rank = redis.call('ZRANK', KEYS[3], id)
local function leave_line()
  if rank then
    redis.call('ZREM', KEYS[3], id)
    redis.call('ZREM', KEYS[4], id)
  end
end
if k > limit then
  leave_line()
  if rank == 0 then serve_line(limit, used_count(), now, retention) end
  return {-3, limit}
end
local used = used_count()
if (rank or redis.call('ZCARD', KEYS[3])) == 0 and used + k <= limit then
  leave_line()
  redis.call('ZADD', KEYS[1], now + lease, id)
  set_used(used + k)
  live_for(KEYS[1], lease + retention)
  -- The next in line may fit in what is left.
  serve_line(limit, used + k, now, retention)
  return {1, limit}
end
if ARGV[5] ~= 'wait' then return {0, 0} end
if not rank then
  local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
  redis.call('ZADD', KEYS[3], (tonumber(last[2]) or 0) + 1, id)
end
redis.call('ZADD', KEYS[4], now + waiter_lease, id)
live_for(KEYS[2], waiter_lease + retention)
live_for(KEYS[3], waiter_lease)
live_for(KEYS[4], waiter_lease)
local wake = waiter_lease
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if first[2] then wake = math.min(wake, tonumber(first[2]) - now) end
local place = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
if place[2] and place[1] ~= id then wake = math.min(wake, tonumber(place[2]) - now) end
return {0, math.max(wake, 1)}
