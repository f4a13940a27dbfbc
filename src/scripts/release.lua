-- Release one hold of a lock.
-- KEYS[1] lock hash   KEYS[2] fence hash   KEYS[3] release channel
-- ARGV[1] owner id   ARGV[2] lease in ms   ARGV[3] operation id   ARGV[4] '1' to drop every hold
-- Returns the holds left (0: released, a message was published), or -1 when the
-- caller does not hold the lock (never did, or its lease ran out).
-- A retried call with the same operation id answers as the first did: the
-- final release leaves "owner|operation" in the fence hash for that purpose.
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner ~= ARGV[1] then
  if redis.call('HGET', KEYS[2], 'released') == ARGV[1] .. '|' .. ARGV[3] then
    return 0
  end
  return -1
end
if redis.call('HGET', KEYS[1], 'seq') == ARGV[3] then
  return tonumber(redis.call('HGET', KEYS[1], 'count'))
end
local count = 0
if ARGV[4] ~= '1' then
  count = redis.call('HINCRBY', KEYS[1], 'count', -1)
end
if count > 0 then
  redis.call('HSET', KEYS[1], 'seq', ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return count
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[2], 'released', ARGV[1] .. '|' .. ARGV[3])
redis.call('PUBLISH', KEYS[3], 'released')
return 0
