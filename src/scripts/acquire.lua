-- Acquire or re-enter a lock.
-- KEYS[1] lock hash {owner, count, seq, token}   KEYS[2] fence hash {token, released}
-- ARGV[1] owner id   ARGV[2] lease in ms   ARGV[3] operation id (unique per owner)
-- Returns {1, token, count} when held by the caller, {0, pttl, 0} when held by another.
-- A retried call with the same operation id answers as the first did and changes nothing:
-- its reply may have been lost on a dropped connection.
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner then
  local token = redis.call('HINCRBY', KEYS[2], 'token', 1)
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'count', 1, 'seq', ARGV[3], 'token', token)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, token, 1}
end
if owner == ARGV[1] then
  local count
  if redis.call('HGET', KEYS[1], 'seq') == ARGV[3] then
    count = tonumber(redis.call('HGET', KEYS[1], 'count'))
  else
    count = redis.call('HINCRBY', KEYS[1], 'count', 1)
    redis.call('HSET', KEYS[1], 'seq', ARGV[3])
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, tonumber(redis.call('HGET', KEYS[1], 'token')), count}
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then pttl = tonumber(ARGV[2]) end
return {0, pttl, 0}
