-- The fence outlives the lock by the retention period: while the lock may
-- be held its expiry is pushed past the lease, and once the lock is free
-- nothing of it stays longer than retention.
local function keep_fence(fence, ms)
  redis.call('PEXPIRE', fence, ms)  -- ms is below 1e14, which a number argument writes in full
end

-- The server's clock in milliseconds. Every deadline a script stores (a
-- reader's lease, a waiting writer's mark) is server time: no client's clock
-- decides anything here.
local function server_ms()
  local now = redis.call('TIME')
  return tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
end

-- Pushes a key's expiry out to at least ms from now, never shortening it.
-- (PEXPIRE GT would leave a key without expiry as it is: it counts as infinite.)
local function extend_expiry(key, ms)
  local left = redis.call('PTTL', key)
  if left == -1 or (left >= 0 and left < tonumber(ms)) then
    redis.call('PEXPIRE', key, ms)
  end
end

-- Read-write lock: readers whose lease has ended (server time) leave the
-- reader set, and their count, last operation and token leave the reader
-- state hash. A crashed reader frees its share within one lease.
-- Acquisitions decide by live_* below and prune after their grant: a write
-- that frees memory first would let the grant through when Redis is out of
-- memory (a script's first write decides whether it may write at all).
local function prune_readers(readers, state, now)
  local gone = redis.call('ZRANGEBYSCORE', readers, '-inf', now)
  for _, reader in ipairs(gone) do
    redis.call('HDEL', state, 'n:' .. reader, 's:' .. reader, 't:' .. reader)
  end
  if #gone > 0 then
    redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)
  end
end

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
