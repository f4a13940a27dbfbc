-- The lock scripts' helpers: each script carries in front of it those it uses, directly or
-- through another helper, and no others (cmake/GenerateScriptsHeader.cmake): a helper is defined
-- anew on every call.
--
-- Operation ids: every owner numbers its operations in increasing order
-- (one counter per client), so a late copy of an old operation (one that
-- sat in the buffer of a paused server, or of a connection the client gave
-- up on) can be told from a new one and ignored.
local function op_number(op)
  return tonumber(op) or 0
end

-- A new fencing token, and its text: past the last one issued for this name and, with
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
  local text = string.format('%.0f', token)  -- (tostring would write a token above 1e14 as 1.7e+15)
  redis.call('HSET', fence, 'token', text)
  return token, text
end

-- The fence outlives the lock by the retention period: while the lock may
-- be held its expiry is pushed past the lease, and once the lock is free
-- nothing of it stays longer than retention.
local function keep_fence(fence, ms)
  redis.call('PEXPIRE', fence, ms)  -- ms is below 1e14, which a number argument writes in full
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

-- One name is one resource, held one way at a time: exclusively (a Lock, FairLock, Redlock,
-- MultiLock member or an RwLock's write side: one lock hash, so they exclude each other), shared
-- by an RwLock's readers (whom a writer waits for), or as a Semaphore's permits. A kind that
-- cannot take part (a Lock does not wait for readers; nothing of a lock waits for permits) is
-- refused with an error reply, "DLOCK_KIND ..." (errc::kind_mismatch), before any write.
local function kind_error(what)
  return redis.error_reply('DLOCK_KIND the name is held as ' .. what .. '; take it as one, or use another name')
end

-- Whether the name is live as another kind than the caller's: `readers` (nil for an RwLock,
-- whose own key it is), a semaphore's permits and its waiters' places (lock_keys.hpp).
-- Called only where the caller's own key is absent (a free name), so re-entries, renewals and
-- busy answers pay nothing and a fresh grant one EXISTS; the closer look runs only when another
-- kind's key exists, since those keys end by expiry some time after their last member did.
-- Returns kind_error's reply, or nil.
local function other_kind(readers, permits, waiters)
  local found
  if readers then found = redis.call('EXISTS', readers, permits, waiters)
  else found = redis.call('EXISTS', permits, waiters) end
  if found == 0 then return nil end
  local now = server_ms()
  if readers and live_count(readers, now) > 0 then
    return kind_error('a read-write lock (readers hold it; its write side waits for them)')
  end
  if live_count(permits, now) + live_count(waiters, now) > 0 then return kind_error('a semaphore') end
  return nil
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

-- Read-write lock: take the read side afresh, or re-enter it.
-- KEYS[1] writer hash   KEYS[2] fence hash   KEYS[3] readers: sorted set reader -> server-time deadline (ms)
-- KEYS[4] reader state hash {n:<reader> count, s:<reader> last operation, t:<reader> token}
-- KEYS[5] waiting writers: sorted set writer -> server-time deadline (ms)   KEYS[6] the owner's read tombstone
-- KEYS[7] semaphore permits   KEYS[8] semaphore waiters: a semaphore of this name (prelude.lua, other_kind)
-- KEYS[9] the places of a fair lock's line on this name: a live place is a writer to come (its
--   waiter may be granted the lock at its next refresh), so a reader waits for it as for a writer
-- ARGV[1] owner   ARGV[2] lease ms   ARGV[3] operation id   ARGV[4] 'fresh' or 'reenter'
-- ARGV[5] retention ms   ARGV[6] '1': readers first (waiting writers are not waited for); '0': writers first
-- A reader is granted when nobody else holds the write side and (writers first) no writer is
-- marked waiting; the writer itself may always take the read side (a downgrade), and a reader
-- may always re-enter (it would otherwise wait for a writer that waits for it). One member per
-- reader, its re-entries counted in the state hash; no key per re-entry. The reader's token is
-- the fence's: the token of the last write it follows (a fence expired after its retention is
-- started again from the server's clock, past every earlier token).
-- Returns {1, token, count}, {0, ms} when it must wait, {-1} for 'reenter' when the caller is
-- no longer a reader, {-2} for a late copy of an older operation (acquire.lua's answers);
-- "DLOCK_KIND ..." when the name is held as a Semaphore. An exclusive holder (a Lock too) is
-- waited for as a writer is.
local now = server_ms()
local reader = ARGV[1]
local reading = live_member(KEYS[3], reader, now)
local op = op_number(ARGV[3])
if reading then
  local seq = op_number(redis.call('HGET', KEYS[4], 's:' .. reader))
  if op == seq then
    return {1, tonumber(redis.call('HGET', KEYS[4], 't:' .. reader)), tonumber(redis.call('HGET', KEYS[4], 'n:' .. reader))}
  end
  if op < seq then return {-2} end
end
if op <= op_number(redis.call('GET', KEYS[6])) then return {-2} end
local lease = tonumber(ARGV[2])
local count = 1
local token
if reading and ARGV[4] == 'reenter' then
  count = redis.call('HINCRBY', KEYS[4], 'n:' .. reader, 1)
  token = tonumber(redis.call('HGET', KEYS[4], 't:' .. reader))
elseif ARGV[4] == 'reenter' then
  return {-1}
else
  -- 'fresh', also when the server still has a read hold of this owner that its client no
  -- longer tracks: it is replaced (count 1, the current token).
  local writer = redis.call('HGET', KEYS[1], 'owner')
  local wait
  if writer and writer ~= reader then
    wait = redis.call('PTTL', KEYS[1])
    if wait < 0 then wait = lease end
  elseif not writer and not reading then
    local refusal = other_kind(nil, KEYS[7], KEYS[8])
    if refusal then return refusal end
    wait = first_deadline_in(KEYS[9], now, nil)
    if not wait and ARGV[6] ~= '1' then wait = first_deadline_in(KEYS[5], now, nil) end
  end
  if wait then
    -- Waiting for the write side's holder: its release publishes (prelude.lua, mark_waited).
    if writer and writer ~= reader then redis.call('HSET', KEYS[1], 'w', '1') end
    raise_tombstone(KEYS[6], ARGV[3], ARGV[5])
    return {0, wait}
  end
  token = tonumber(redis.call('HGET', KEYS[2], 'token')) or next_token(KEYS[2], true)
end
redis.call('ZADD', KEYS[3], 'GT', now + lease, reader)
redis.call('HSET', KEYS[4], 'n:' .. reader, count, 's:' .. reader, ARGV[3], 't:' .. reader, string.format('%.0f', token))
extend_expiry(KEYS[3], lease)
extend_expiry(KEYS[4], lease)
keep_fence(KEYS[2], lease + ARGV[5])
prune_readers(KEYS[3], KEYS[4], now)
return {1, token, count}
