-- Give permits back, or give up a request.
-- KEYS as in the prelude.
-- ARGV[1] permit id   ARGV[2] retention ms
-- ARGV[3] 'release', or 'undo': the caller will not use this request's outcome (it gave up
-- waiting, or never learnt the answer). A grant is given back, a place in line is left, and
-- the id is retired so that a late copy of the request never grants.
-- Returns 1 released; 0 a resent copy of a release that was done; -1 not held (expired, never
-- granted, given up): nothing is given back, so the count is never raised.
-- Server calls (docs/design/server-work.md): a release of a held permit when nobody is in line
-- and nobody waits for the semaphore to be free 10; one that grants the first in line its
-- permit 19 (was 30).
-- The common paths come first, with no helper but publish and tell_granted (cmake/GenerateScriptsHeader.cmake,
-- --@helpers): the release of a permit whose lease has not ended, when nobody is in line and
-- nobody waits for the semaphore to be free ('w', mark_waited.lua), and one that
-- hands the permit to the first in line. It prunes only the retired
-- ids, where it adds one: a lease of another permit that ended stays counted until a call
-- that needs the count exact prunes it (semaphore_acquire.lua). Everything else goes on to
-- the general code, which prunes and answers as before.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local id, retention = ARGV[1], tonumber(ARGV[2])
-- The line first, and whether the retired ids' key exists, in one call (the latter given
-- twice): a release with someone in line pays one call for the common path.
local seen = ARGV[3] == 'release' and redis.call('EXISTS', KEYS[3], KEYS[5], KEYS[5])
if seen and seen % 2 == 0 then
  local lease_end = tonumber(redis.call('ZSCORE', KEYS[1], id))
  if lease_end and lease_end > now then
    local s = redis.call('HMGET', KEYS[2], 'used', 'w')
    local used, k = tonumber(s[1]), tonumber(string.match(id, '#(%d+)$')) or 1
    if used and used >= k and not (tonumber(s[2]) and tonumber(s[2]) > now) then
      redis.call('ZREM', KEYS[1], id)
      redis.call('HSET', KEYS[2], 'used', used - k)
      -- retire(id), the new id added before the old ones go, so the key is never left empty.
      redis.call('ZADD', KEYS[5], now + retention, id)
      if seen == 2 then
        redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
        redis.call('PEXPIRE', KEYS[5], retention, 'GT')
      else
        redis.call('PEXPIRE', KEYS[5], retention)
      end
      redis.call('PEXPIRE', KEYS[2], retention, 'GT')
      return 1
    end
  end
elseif seen then
  -- Someone is in line: the permit goes to the first in line (serve_line's direct grant)
  -- when that one takes direct grants, its place has not ended, no lease in the permits has
  -- ended, and the permits are all in use after it (so nobody behind it fits: the line needs
  -- no more serving). A lease that ended would free a permit for the one behind the head, and
  -- nobody else would ask for it until that one's next refresh: the general code prunes it
  -- and serves on. Everything else goes on to the general code too.
  local lease_end = tonumber(redis.call('ZSCORE', KEYS[1], id))
  local first_end = tonumber(redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2])
  if lease_end and lease_end > now and first_end and first_end > now then
    local s = redis.call('HMGET', KEYS[2], 'used', 'limit')
    local used, limit = tonumber(s[1]), tonumber(s[2])
    local k = tonumber(string.match(id, '#(%d+)$')) or 1
    local head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
    -- takes_grants: the head's id ends '!#k'.
    local head_k = head and string.find(head, '!#%d+$') and tonumber(string.match(head, '#(%d+)$'))
    if used and limit and used >= k and head_k and used - k + head_k == limit then
      local place = tonumber(redis.call('ZSCORE', KEYS[4], head))
      if place and place > now then
        -- The head's permit first, the caller's out after it: the permits key never empties.
        redis.call('ZADD', KEYS[1], place, head)
        redis.call('ZREM', KEYS[1], id)
        redis.call('ZREM', KEYS[3], head)
        redis.call('ZREM', KEYS[4], head)
        redis.call('HSET', KEYS[2], 'used', limit)
        -- retire(id), as above.
        redis.call('ZADD', KEYS[5], now + retention, id)
        if seen >= 3 then
          redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
          redis.call('PEXPIRE', KEYS[5], retention, 'GT')
        else
          redis.call('PEXPIRE', KEYS[5], retention)
        end
        -- live_for both keys: they existed, with an expiry (the permits held one, the state
        -- counted it).
        redis.call('PEXPIRE', KEYS[1], place - now + retention, 'GT')
        redis.call('PEXPIRE', KEYS[2], place - now + retention, 'GT')
        tell_granted(head)
        return 1
      end
    end
  end
end
--@helpers
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
  if result == 1 and used == 0 and redis.call('EXISTS', KEYS[3]) == 0 then
    publish(KEYS[6], 'free')
    -- Told: whoever still waits marks it again (mark_waited.lua).
    redis.call('HDEL', KEYS[2], 'w')
  end
end
return result
