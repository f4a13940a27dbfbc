-- An operator's override: remove the lock whoever holds it and wake its waiters.
-- KEYS[1] lock hash   KEYS[2] release channel
-- Returns {owner, count} of the removed holder, or false when the lock was free.
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner then
  return false
end
local count = tonumber(redis.call('HGET', KEYS[1], 'count'))
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', KEYS[2], 'released')
return {owner, count}
