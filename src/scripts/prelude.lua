-- Prepended to every lock script at build time (cmake/EmbedScripts.cmake).
--
-- Operation ids: every owner numbers its operations in increasing order
-- (one counter per client), so a late copy of an old operation (one that
-- sat in the buffer of a paused server, or of a connection the client gave
-- up on) can be told from a new one and ignored.
local function op_number(op)
  return tonumber(op) or 0
end

-- A new fencing token: past the last one issued for this name and, with
-- floor_always (or when the counter is gone), at least the server's clock
-- in microseconds. Tokens therefore keep increasing after the counter is
-- lost (retention expiry, eviction, a restart without persistence, a
-- failover to a replica that lagged), as long as the server's clock does
-- not step back.
local function next_token(fence, floor_always)
  local last = tonumber(redis.call('HGET', fence, 'token'))
  local token = last and last + 1 or 0
  if floor_always or not last then
    local now = redis.call('TIME')
    local now_us = tonumber(now[1]) * 1000000 + tonumber(now[2])
    if now_us > token then token = now_us end
  end
  redis.call('HSET', fence, 'token', string.format('%.0f', token))
  return token
end

-- The fence outlives the lock by the retention period: while the lock may
-- be held its expiry is pushed past the lease, and once the lock is free
-- nothing of it stays longer than retention.
local function keep_fence(fence, ms)
  redis.call('PEXPIRE', fence, string.format('%.0f', ms))
end

-- The owner's tombstone keeps the highest operation id that may no longer
-- grant: a final release's, and a fresh acquisition's that was answered
-- busy (a late copy of it, arriving once the lock is free, must not grant
-- a hold its client gave up on). It never goes down, and expires after
-- the retention period.
local function raise_tombstone(tombstone, op, ms)
  if op_number(op) > op_number(redis.call('GET', tombstone)) then
    redis.call('SET', tombstone, op, 'PX', ms)
  end
end
