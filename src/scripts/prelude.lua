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

-- The exclusive hold of a lock hash {owner, count, seq, token, holder}, as
-- acquire.lua and rw_write_acquire.lua both keep it.
-- The answer to operation op of owner when it is a resent copy ({1, token,
-- count}, as the first copy answered) or a late copy of an operation that may
-- no longer grant ({-2}); nil for a new operation.
local function replayed_acquire(lock, tombstone, owner, holder, op)
  if holder == owner then
    local seq = op_number(redis.call('HGET', lock, 'seq'))
    if op == seq then
      return {1, tonumber(redis.call('HGET', lock, 'token')), tonumber(redis.call('HGET', lock, 'count'))}
    end
    if op < seq then return {-2} end
  end
  -- An operation its client gave up on (answered busy, or undone after its
  -- outcome stayed unknown) never applies, however late a copy arrives.
  if op <= op_number(redis.call('GET', tombstone)) then return {-2} end
  return nil
end

-- One more hold of the owner: never more than one lease from now, however deep.
local function reenter_exclusive(lock, fence, op_id, lease, retention)
  local count = redis.call('HINCRBY', lock, 'count', 1)
  redis.call('HSET', lock, 'seq', op_id)
  redis.call('PEXPIRE', lock, lease, 'GT')
  keep_fence(fence, lease + retention)
  return {1, tonumber(redis.call('HGET', lock, 'token')), count}
end

-- A fresh exclusive hold: count 1, a new token; label says who holds it, for operators.
local function grant_exclusive(lock, fence, owner, op_id, lease, retention, floor_always, label)
  local token = next_token(fence, floor_always)
  redis.call('DEL', lock)
  redis.call('HSET', lock, 'owner', owner, 'count', 1, 'seq', op_id, 'token', string.format('%.0f', token))
  if label and label ~= '' then redis.call('HSET', lock, 'holder', label) end
  redis.call('PEXPIRE', lock, lease)
  keep_fence(fence, lease + retention)
  return {1, token, 1}
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

-- Whether member's deadline in a sorted set is still ahead (server time).
local function live_member(set, member, now)
  local deadline = redis.call('ZSCORE', set, member)
  return deadline and tonumber(deadline) > now
end

-- How many members of a sorted set have a deadline still ahead.
local function live_count(set, now)
  return redis.call('ZCOUNT', set, '(' .. now, '+inf')
end

-- The earliest deadline still ahead in a sorted set, other than `except`'s,
-- as ms from now (at least 1), or nil when there is none.
local function first_deadline_in(set, now, except)
  local first = redis.call('ZRANGE', set, '(' .. now, '+inf', 'BYSCORE', 'LIMIT', 0, 2, 'WITHSCORES')
  for i = 1, #first, 2 do
    if first[i] ~= except then
      return math.max(tonumber(first[i + 1]) - now, 1)
    end
  end
  return nil
end
