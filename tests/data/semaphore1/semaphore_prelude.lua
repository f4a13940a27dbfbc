-- Helpers of the semaphore scripts: each script carries those it uses (cmake/GenerateScriptsHeader.cmake).
--
-- Every semaphore script is called with the same keys, all under the
-- semaphore's one hash tag:
-- KEYS[1] permits: zset permit id -> the server-time (ms) its lease ends; the key lives lease +
--   retention past the last lease set, so expired permits are pruned here, never dropped by expiry
-- KEYS[2] state: hash {limit, used}
-- KEYS[3] queue: zset waiter id -> arrival number (FIFO order)
-- KEYS[4] waiter deadlines: zset waiter id -> the server-time (ms) its place ends unless refreshed
-- KEYS[5] done: zset id -> the server-time (ms) it may be forgotten. '<id>' was released
--   (a resent release is answered "released"); '~<id>' expired or was given up. Neither grants again.
-- KEYS[6] the semaphore's channel: the id of the first waiter when its permits are free;
--   'limit' when the limit changed (every waiter asks again)
-- A waiter's id is the permit id it asks for. Permit ids end in '#k': k permits.
-- No client clock decides anything here: every time is the server's TIME.

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function weight(id)
  return tonumber(string.match(id, '#(%d+)$')) or 1
end

-- Lets key live at least ms more; never shortens its life.
local function live_for(key, ms)
  local ttl = redis.call('PTTL', key)
  if ttl ~= -2 and ttl < ms then redis.call('PEXPIRE', key, string.format('%.0f', ms)) end
end

-- Permits in use. The counter is recounted from the permits themselves when
-- it is gone (the state expired or was evicted while permits were held), and
-- is 0 when they are: the permits key outlives every lease in it, so when it
-- is gone no permit is held.
local function used_count()
  if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
  local used = tonumber(redis.call('HGET', KEYS[2], 'used'))
  if used then return used end
  used = 0
  for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do used = used + weight(id) end
  redis.call('HSET', KEYS[2], 'used', used)
  return used
end

local function set_used(used)
  if used < 0 then used = 0 end
  redis.call('HSET', KEYS[2], 'used', used)
end

-- Remembers id (released, or '~' .. id: expired or given up) for retention ms.
local function retire(id, now, retention)
  redis.call('ZADD', KEYS[5], now + retention, id)
  live_for(KEYS[5], retention)
end

-- Expired permits come back, expired waiters lose their place, and ids past
-- their retention are forgotten: every script starts here.
local function prune(now, retention)
  local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
  if #expired > 0 then
    local used = used_count()
    for _, id in ipairs(expired) do
      used = used - weight(id)
      redis.call('ZREM', KEYS[1], id)
      retire('~' .. id, now, retention)
    end
    set_used(used)
  end
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now)) do
    redis.call('ZREM', KEYS[3], id)
    redis.call('ZREM', KEYS[4], id)
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
end

-- Calls the first in line by its id, when its permits are free: only that
-- waiter wakes and asks (no herd). When it is granted and permits are left,
-- the grant calls the next one.
local function call_next(limit, used)
  local head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
  if head and used + weight(head) <= limit then publish(KEYS[6], head) end
end
