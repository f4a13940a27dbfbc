-- Extend the lease of a permit the caller still holds.
-- KEYS as in the prelude.   ARGV[1] permit id   ARGV[2] lease ms   ARGV[3] retention ms
-- Returns 1 when extended, 0 when the permit is not held any more (lost).
local now = now_ms()
local id, lease, retention = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
prune(now, retention)
if not redis.call('ZSCORE', KEYS[1], id) then return 0 end
redis.call('ZADD', KEYS[1], 'XX', 'GT', now + lease, id)
live_for(KEYS[1], lease + retention)
live_for(KEYS[2], lease + retention)
return 1
