-- Extend the lease of a permit the caller still holds.
-- KEYS as in the prelude.   ARGV[1] permit id   ARGV[2] lease ms   ARGV[3] retention ms
-- Returns 1 when extended, 0 when the permit is not held any more (lost).
-- Server calls (docs/design/server-work.md): a renewal of a permit whose lease has not ended 5.
-- The common path comes first, with no helper (cmake/GenerateScriptsHeader.cmake, --@helpers):
-- a permit still held. It prunes nothing: the lease asked about is the only one it reads.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local id, lease, retention = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local lease_end = tonumber(redis.call('ZSCORE', KEYS[1], id))
if lease_end and lease_end > now then
  redis.call('ZADD', KEYS[1], 'XX', 'GT', now + lease, id)
  -- live_for: both keys have an expiry (they hold a permit and its count; a state hash that
  -- is gone stays gone, as live_for leaves it).
  redis.call('PEXPIRE', KEYS[1], lease + retention, 'GT')
  redis.call('PEXPIRE', KEYS[2], lease + retention, 'GT')
  return 1
end
--@helpers
prune(now, retention)
if not redis.call('ZSCORE', KEYS[1], id) then return 0 end
redis.call('ZADD', KEYS[1], 'XX', 'GT', now + lease, id)
live_for(KEYS[1], lease + retention)
live_for(KEYS[2], lease + retention)
return 1
