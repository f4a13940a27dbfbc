-- Extend the lease of a lock the caller still holds.
-- KEYS[1] lock hash   ARGV[1] owner id   ARGV[2] lease in ms
-- KEYS[2] (Redlock only) fence hash: when given and this master has no
--   trace of the lock at all (no lock, no fence hash: it restarted without
--   its data, or was flushed), take it again. The rest of the majority still
--   holds it for us, so no one else can have the lock, and taking the key
--   back keeps the majority whole. A lock that is merely gone (released,
--   force-released, expired) left its fence hash behind and is not taken.
-- Returns 1 when extended (or taken back), 0 when the caller no longer holds it (lost).
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not owner and KEYS[2] and redis.call('EXISTS', KEYS[2]) == 0 then
  local token = redis.call('HINCRBY', KEYS[2], 'token', 1)
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'count', 1, 'seq', '', 'token', token)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
