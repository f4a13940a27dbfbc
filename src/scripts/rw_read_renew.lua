-- Read-write lock: extend the lease of a reader (the lease keeper's renewal).
-- KEYS[1] readers   KEYS[2] reader state hash   KEYS[3] fence hash
-- ARGV[1] owner   ARGV[2] lease ms   ARGV[3] retention ms
-- Returns 1 when extended, 0 when the caller is no longer a reader (its lease ended: lost).
-- Server calls (docs/design/server-work.md): 7 (were 8-10).
local now = server_ms()
-- Readers whose lease ended leave first, with their state: a renewal is what runs on a name
-- read for a long time, so their state does not stay while it is. (It writes only when there
-- are some.) The caller, if its own lease ended, leaves with them.
prune_readers(KEYS[1], KEYS[2], now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
-- The first write is PEXPIRE, which Redis lets through when out of memory; the ZADD after it
-- then runs too (a renewal must not fail for want of memory, as renew.lua's PEXPIRE does not).
-- The reader set exists, and the state hash has an expiry if it exists at all (prelude.lua,
-- lengthen_expiry).
redis.call('PEXPIRE', KEYS[1], ARGV[2], 'GT')
redis.call('ZADD', KEYS[1], 'XX', 'GT', now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[2], 'GT')
keep_fence(KEYS[3], ARGV[2] + ARGV[3])
return 1
