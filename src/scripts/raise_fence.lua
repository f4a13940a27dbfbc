-- Raise a lock's fencing counter to at least a given token (Redlock).
-- KEYS[1] fence hash   ARGV[1] token
-- A Redlock token is the largest counter among the granting masters; raising
-- the others to it means every later majority, which shares a master with
-- this one, counts past it.
-- Returns the counter afterwards.
local current = tonumber(redis.call('HGET', KEYS[1], 'token')) or 0
local wanted = tonumber(ARGV[1])
if current < wanted then
  redis.call('HSET', KEYS[1], 'token', wanted)
  return wanted
end
return current
