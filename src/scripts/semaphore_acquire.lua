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
-- Server calls (docs/design/server-work.md): a grant when permits are free and nobody is in
-- line 8, a busy answer of a 'try' 6, a new waiter joining others in line 14 (was 24).
-- The common paths come first, with no helper (cmake/GenerateScriptsHeader.cmake, --@helpers):
-- a grant when the k permits fit and nobody is in line, and a busy answer of a 'try' when they
-- do not. They prune nothing: a permit whose lease ended and that is not pruned yet still
-- counts as used, so a grant that fits with it fits without it (never more than the limit);
-- a busy answer is given only when no lease in the set has ended, so its count is exact. A
-- request whose own id is held already or retired goes on to the general code, which prunes
-- and answers as before. With others in line, a new waiter's request joins the line's end
-- when nothing in the permits or the line has ended. Every other case (another kind's keys, a
-- limit not the one asked, the counter gone, a waiter's refresh) goes there too.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local id, k = ARGV[1], tonumber(ARGV[2])
local lease, retention = tonumber(ARGV[3]), tonumber(ARGV[7])
do
  -- The line, the other kinds' keys, and whether the permits key exists, in one call: EXISTS
  -- counts a key once per mention, so the other kinds' keys (given twice each) add 2 each and
  -- the permits key (given eight times) 8. seen % 8: 0, no line and no other kind; 1, only a line.
  local seen = redis.call('EXISTS', KEYS[3], KEYS[7], KEYS[7], KEYS[8], KEYS[8], KEYS[9], KEYS[9],
                          KEYS[1], KEYS[1], KEYS[1], KEYS[1], KEYS[1], KEYS[1], KEYS[1], KEYS[1])
  local asked = tonumber(ARGV[4])
  if seen % 8 == 1 and ARGV[5] == 'wait' and k <= asked and not redis.call('ZRANK', KEYS[3], id) then
    -- Others are in line: a new request joins the line's end (it never goes before them),
    -- when the limit is the one asked and no lease or place has ended (the general code
    -- prunes those first; here nothing would be pruned but retired ids). Everything else
    -- (a waiter's refresh, the caller held or retired, a limit not the one asked) goes on.
    if tonumber(redis.call('HGET', KEYS[2], 'limit')) == asked then
      local first_lease = tonumber(redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2])
      local first_place = tonumber(redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')[2])
      if (not first_lease or first_lease > now) and first_place and first_place > now and
         not redis.call('ZSCORE', KEYS[1], id) then
        local done = redis.call('ZMSCORE', KEYS[5], id, '~' .. id)
        if not (done[1] or done[2]) then
          local waiter_lease = tonumber(ARGV[6])
          local last = tonumber(redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')[2])
          redis.call('ZADD', KEYS[3], last + 1, id)
          redis.call('ZADD', KEYS[4], now + waiter_lease, id)
          -- live_for: the three keys existed (the line and its places, and the state whose
          -- limit was read), each with an expiry since the call that made it.
          redis.call('PEXPIRE', KEYS[2], math.max(lease, waiter_lease) + retention, 'GT')
          redis.call('PEXPIRE', KEYS[3], waiter_lease, 'GT')
          redis.call('PEXPIRE', KEYS[4], waiter_lease, 'GT')
          local wake = math.min(waiter_lease, first_place - now)
          if first_lease then wake = math.min(wake, first_lease - now) end
          return {0, math.max(wake, 1)}
        end
      end
    end
  elseif seen % 8 == 0 and k <= asked then
    local permits_kept = seen == 8
    local s = redis.call('HMGET', KEYS[2], 'limit', 'used', 'w')
    local fresh = not (s[1] or s[2] or s[3])  -- no state hash
    -- No permits key: no permit is held, whatever the counter says (used_count).
    local used = 0
    if permits_kept then used = tonumber(s[2]) end
    if used and (fresh or tonumber(s[1]) == asked) then
      if used + k <= asked then
        local done = redis.call('ZMSCORE', KEYS[5], id, '~' .. id)
        if not (done[1] or done[2]) and redis.call('ZADD', KEYS[1], 'NX', now + lease, id) == 1 then
          if fresh then redis.call('HSET', KEYS[2], 'limit', asked, 'used', used + k)
          else redis.call('HSET', KEYS[2], 'used', used + k) end
          -- Each key lives lease + retention at least (live_for); GT on a key that had an
          -- expiry, a plain PEXPIRE on one made here (GT leaves a key without expiry as it is).
          if permits_kept then redis.call('PEXPIRE', KEYS[1], lease + retention, 'GT')
          else redis.call('PEXPIRE', KEYS[1], lease + retention) end
          if fresh then redis.call('PEXPIRE', KEYS[2], lease + retention)
          else redis.call('PEXPIRE', KEYS[2], lease + retention, 'GT') end
          return {1, asked}
        end
      elseif ARGV[5] ~= 'wait' and not redis.call('ZSCORE', KEYS[1], id) then
        local first_end = tonumber(redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2])
        if first_end and first_end > now then
          local done = redis.call('ZMSCORE', KEYS[5], id, '~' .. id)
          if not (done[1] or done[2]) then return {0, 0} end
        end
      end
    end
  end
end
--@helpers
local waiter_lease = tonumber(ARGV[6])
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
