-- Helpers of the semaphore scripts: each script carries those it uses (cmake/GenerateScriptsHeader.cmake).
--
-- Every semaphore script is called with the same keys, all under the
-- semaphore's one hash tag:
-- KEYS[1] permits: zset permit id -> the server-time (ms) its lease ends; the key lives lease +
--   retention past the last lease set, so expired permits are pruned here, never dropped by expiry
-- KEYS[2] state: hash {limit, used, w}; w (optional): the server-time (ms) until which someone
--   waits for the semaphore to be free (mark_waited.lua)
-- KEYS[3] queue: zset waiter id -> arrival number (FIFO order)
-- KEYS[4] waiter deadlines: zset waiter id -> the server-time (ms) its place ends unless refreshed
-- KEYS[5] done: zset id -> the server-time (ms) it may be forgotten. '<id>' was released
--   (a resent release is answered "released"); '~<id>' expired or was given up. Neither grants again.
-- KEYS[6] the semaphore's channel: 'granted <id>' when the first waiter was granted its
--   permits (serve_line) and its client hears grants here (tell_granted); the id alone when
--   its permits are free and it must ask (a client from before direct grant); 'limit' when
--   the limit changed (every waiter asks again); 'free' when the last permit came back and
--   nobody waits
-- A waiter's id is the permit id it asks for. Permit ids end in '#k': k permits; '!#k' when
-- the waiter's client takes direct grants (takes_grants); '!!#k' when it also hears them on
-- its own inbox (tell_granted).
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
  -- A state hash made here lives as long as the permits it counts: the common paths only
  -- lengthen an expiry (PEXPIRE GT), which leaves a key with none as it is.
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then live_for(KEYS[2], ttl) end
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
-- their retention are forgotten: every script's general code starts here (the
-- common paths before --@helpers need no exact count, semaphore_acquire.lua).
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

-- Whether a waiter's client takes a direct grant from its notice: its permit
-- id ends '!#k'. A waiter of a client from before direct grant (an id with
-- no '!' before the '#', which its scripts read as opaque) is called
-- instead: it would not understand the notice, and its acquire would answer
-- "granted" without extending the lease it then trusts.
local function takes_grants(id)
  return string.find(id, '!#%d+$') ~= nil
end

-- Tells a waiter granted directly. One whose id ends '!!#k' hears it on its client's inbox
-- (inbox_of, publish.lua; 'granted-permit <id> <the semaphore's channel>'): only that
-- client's subscriber reads it. One whose id ends '!#k' (a client from before) hears it on
-- the semaphore's channel ('granted <id>'), which every client waiting on the semaphore
-- reads and all but one ignore.
local function tell_granted(id)
  if string.find(id, '!!#%d+$') then
    publish(inbox_of(id, KEYS[1]), 'granted-permit ' .. id .. ' ' .. KEYS[6])
  else
    publish(KEYS[6], 'granted ' .. id)
  end
end

-- Serves the line while the permits of the first in line are free, strictly
-- in arrival order (a head whose k do not fit stops it). A head that takes
-- direct grants is granted here: out of the line, its permits leased until
-- its place would have ended (its client counts its waiter_lease from the
-- last request that kept the place, so never past that), and told alone on
-- its inbox or the channel (tell_granted); its first renewal gives it the full lease. A head of an
-- older client is called by its id (only it wakes, no herd) and asks; its
-- grant serves the next. Nothing is published when nobody is in line.
-- Returns the permits in use after.
local function serve_line(limit, used, now, retention)
  local granted = false
  while true do
    local head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
    if not head or used + weight(head) > limit then break end
    local place = tonumber(redis.call('ZSCORE', KEYS[4], head))
    if not place or not takes_grants(head) then
      publish(KEYS[6], head)
      break
    end
    redis.call('ZREM', KEYS[3], head)
    redis.call('ZREM', KEYS[4], head)
    redis.call('ZADD', KEYS[1], place, head)
    used = used + weight(head)
    granted = true
    live_for(KEYS[1], place - now + retention)
    live_for(KEYS[2], place - now + retention)
    tell_granted(head)
  end
  if granted then set_used(used) end
  return used
end
