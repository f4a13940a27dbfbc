-- Extend the lease of a lock the caller still holds.
-- KEYS[1] lock hash   ARGV[1] owner id   ARGV[2] lease in ms
-- Returns 1 when extended, 0 when the caller no longer holds it (lost).
if redis.call('HGET', KEYS[1], 'owner') == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
