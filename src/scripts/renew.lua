-- Extend the lease of a lock the caller still holds.
-- KEYS[1] lock hash   KEYS[2] fence hash
-- ARGV[1] owner   ARGV[2] lease ms   ARGV[3] retention ms
-- ARGV[4] '1' (Redlock only): when this master has no trace of the lock at all (no lock,
--   no fence: it restarted without its data, or was flushed), take it again. The rest of
--   the majority still holds it for us, so no one else can have it, and taking the key
--   back keeps the majority whole. A lock that is merely gone (released, force-released,
--   expired) left its fence behind for the retention period and is not taken.
-- ARGV[5] (optional) who the holder is, for operators: a hold granted from the line was written
--   without it (its renewals bring it)
-- Returns 1 when extended (or taken back), 0 when the caller no longer holds it (lost).
-- The common path first (acquire.lua): the caller still holds it.
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner == ARGV[1] then
  if ARGV[5] then redis.call('HSET', KEYS[1], 'holder', ARGV[5]) end
  redis.call('PEXPIRE', KEYS[1], ARGV[2], 'GT')
  keep_fence(KEYS[2], ARGV[2] + ARGV[3])
  return 1
end
--@helpers
if not owner and ARGV[4] == '1' and redis.call('EXISTS', KEYS[2]) == 0 then
  local token = next_token(KEYS[2], false)
  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'count', 1, 'seq', '0', 'token', string.format('%.0f', token),
             'v', layout)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  keep_fence(KEYS[2], ARGV[2] + ARGV[3])
  return 1
end
return 0
