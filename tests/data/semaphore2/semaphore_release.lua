-- Give permits back, or give up a request.
-- KEYS as in the prelude.
-- ARGV[1] permit id   ARGV[2] retention ms
-- ARGV[3] 'release', or 'undo': the caller will not use this request's outcome (it gave up
-- waiting, or never learnt the answer). A grant is given back, a place in line is left, and
-- the id is retired so that a late copy of the request never grants.
-- Returns 1 released; 0 a resent copy of a release that was done; -1 not held (expired, never
-- granted, given up): nothing is given back, so the count is never raised.
local now = now_ms()
local id, retention = ARGV[1], tonumber(ARGV[2])
prune(now, retention)
local was_head = redis.call('ZRANK', KEYS[3], id) == 0
redis.call('ZREM', KEYS[3], id)
redis.call('ZREM', KEYS[4], id)
local result = -1
if redis.call('ZSCORE', KEYS[1], id) then
  -- Counted before the permit leaves: a count remade from the permits
  -- (the state was lost) must still include it, or it is taken off twice.
  local used = used_count()
  redis.call('ZREM', KEYS[1], id)
  set_used(used - weight(id))
  retire(id, now, retention)
  result = 1
elseif redis.call('ZSCORE', KEYS[5], id) then
  result = 0
elseif ARGV[3] == 'undo' then
  retire('~' .. id, now, retention)
end
-- The counter lives as long as the semaphore's other state, also when this
-- call made it anew.
live_for(KEYS[2], retention)
if result == 1 or was_head then
  local limit = tonumber(redis.call('HGET', KEYS[2], 'limit'))
  local used = used_count()
  if limit then used = serve_line(limit, used, now, retention) end
  -- The last permit back and nobody in line: 'free', for whoever waits for the
  -- name to be free without taking it (wait_until_free); waiters ignore it.
  if result == 1 and used == 0 and redis.call('EXISTS', KEYS[3]) == 0 then publish(KEYS[6], 'free') end
end
return result
