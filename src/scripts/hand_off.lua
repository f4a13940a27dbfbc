-- Hand a held lock straight to the next owner, a waiter in the same process:
-- no release, no release message, no race with other processes.
-- KEYS[1] lock hash   KEYS[2] fence hash
-- ARGV[1] current owner   ARGV[2] next owner   ARGV[3] next owner's lease in ms   ARGV[4] operation id
-- Returns {1, token} with the next owner's new fencing token, or {0} when the
-- caller does not hold the lock exactly once (lost, or still re-entered).
-- A retried call with the same operation id answers as the first did.
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner == ARGV[2] and redis.call('HGET', KEYS[1], 'seq') == ARGV[4] then
  return {1, tonumber(redis.call('HGET', KEYS[1], 'token'))}
end
if owner ~= ARGV[1] or redis.call('HGET', KEYS[1], 'count') ~= '1' then
  return {0}
end
local token = redis.call('HINCRBY', KEYS[2], 'token', 1)
redis.call('HSET', KEYS[1], 'owner', ARGV[2], 'count', 1, 'seq', ARGV[4], 'token', token)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, token}
