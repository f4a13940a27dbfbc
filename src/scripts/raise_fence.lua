-- Raise a lock's fencing counter to at least a given token (Redlock).
-- KEYS[1] fence hash   ARGV[1] token   ARGV[2] how long the fence must stay, ms (lease + retention)
-- A Redlock token is the largest counter among the granting masters; raising
-- the others to it means every later majority, which shares a master with
-- this one, counts past it.
-- Returns the counter afterwards.
local current = tonumber(redis.call('HGET', KEYS[1], 'token')) or 0
local wanted = tonumber(ARGV[1])
if current < wanted then
  redis.call('HSET', KEYS[1], 'token', ARGV[1])
  current = wanted
end
keep_fence(KEYS[1], tonumber(ARGV[2]))
return current
