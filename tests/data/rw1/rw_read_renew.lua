-- Read-write lock: extend the lease of a reader (the lease keeper's renewal).
-- KEYS[1] readers   KEYS[2] reader state hash   KEYS[3] fence hash
-- ARGV[1] owner   ARGV[2] lease ms   ARGV[3] retention ms
-- Returns 1 when extended, 0 when the caller is no longer a reader (its lease ended: lost).
local now = server_ms()
-- Pruning is always the first write, even when nothing has expired: it frees
-- memory, so Redis lets it through when out of memory, and the renewal's
-- ZADD after it then runs too (a renewal must not fail for want of memory,
-- as renew.lua's PEXPIRE does not).
-- prune_readers first: it finds the expired readers to forget their state
-- (after the removal there would be none to find), and writes only when
-- there are some; the removal after it is then a write that frees nothing.
prune_readers(KEYS[1], KEYS[2], now)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], 'XX', 'GT', now + tonumber(ARGV[2]), ARGV[1])
extend_expiry(KEYS[1], ARGV[2])
extend_expiry(KEYS[2], ARGV[2])
keep_fence(KEYS[3], ARGV[2] + ARGV[3])
return 1
