-- Read-write lock: take the read side afresh, or re-enter it.
-- KEYS[1] writer hash   KEYS[2] fence hash   KEYS[3] readers: sorted set reader -> server-time deadline (ms)
-- KEYS[4] reader state hash {n:<reader> count, s:<reader> last operation, t:<reader> token,
--   w: someone waits for the readers to leave (rw_read_release.lua)}
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
-- no longer a reader (or its state, count and token, is gone), {-2} for a late copy of an older operation (acquire.lua's answers);
-- "DLOCK_KIND ..." when the name is held as a Semaphore. An exclusive holder (a Lock too) is
-- waited for as a writer is.
-- Server calls (docs/design/server-work.md): a fresh grant of a name nobody else uses 9, beside
-- other readers 10 (11 when the state hash's expiry reaches that far already), a re-entry 9
-- (were 16, 14-16, 12-14).
-- The common paths come first, with the few helpers they use (acquire.lua): a fresh grant when
-- nobody holds or waits for the write side and no semaphore has the name (the first reader, or
-- one beside others), and a live reader's re-entry. Each answers as the general code below
-- would; everything else goes on to that code.
local reader = ARGV[1]
local op = op_number(ARGV[3])
local lease = tonumber(ARGV[2])
if ARGV[4] == 'fresh' then
  -- The writer's hash, the waiting writers (readers first: not waited for), the fair line's
  -- places and the semaphore's keys in one look, each counted twice, the readers once: 0, a
  -- name nobody uses; 1, only readers.
  local found
  if ARGV[6] == '1' then
    found = redis.call('EXISTS', KEYS[3], KEYS[1], KEYS[1], KEYS[9], KEYS[9], KEYS[7], KEYS[7], KEYS[8], KEYS[8])
  else
    found = redis.call('EXISTS', KEYS[3], KEYS[1], KEYS[1], KEYS[5], KEYS[5], KEYS[9], KEYS[9],
                       KEYS[7], KEYS[7], KEYS[8], KEYS[8])
  end
  -- A late copy of an operation given up never grants. Beside readers the caller may be one
  -- already (a resent copy, a hold its client no longer tracks): the general code answers it.
  local given_up = found <= 1 and op <= op_number(redis.call('GET', KEYS[6]))
  if given_up and found == 0 then return {-2} end
  if found <= 1 and not given_up then
    local text = redis.call('HGET', KEYS[2], 'token')
    local token = tonumber(text)
    if not token then token, text = next_token(KEYS[2], true) end
    local now = server_ms()
    -- NX: a caller that is a member already (see above; or one whose lease ended) goes on to
    -- the general code, nothing written.
    if redis.call('ZADD', KEYS[3], 'NX', now + lease, reader) == 1 then
      redis.call('HSET', KEYS[4], 'n:' .. reader, 1, 's:' .. reader, ARGV[3], 't:' .. reader, text)
      if found == 0 then
        -- The first reader: the reader set is new, and the state hash holds nothing of a live
        -- reader, so both live this lease; no reader's lease has ended in a new set.
        redis.call('PEXPIRE', KEYS[3], lease)
        redis.call('PEXPIRE', KEYS[4], lease)
      else
        -- The reader set existed (prelude.lua, lengthen_expiry); the state hash is not looked at.
        redis.call('PEXPIRE', KEYS[3], lease, 'GT')
        lengthen_expiry(KEYS[4], lease)
        prune_readers(KEYS[3], KEYS[4], now)
      end
      keep_fence(KEYS[2], lease + ARGV[5])
      return {1, token, 1}
    end
  end
elseif ARGV[4] == 'reenter' then
  local held = redis.call('HMGET', KEYS[4], 's:' .. reader, 'n:' .. reader, 't:' .. reader)
  if held[1] and held[3] and op > op_number(held[1]) then
    local now = server_ms()
    local deadline = tonumber(redis.call('ZSCORE', KEYS[3], reader))
    if deadline and deadline > now then
      -- An operation given up while the caller read (undone, its outcome unknown) never applies.
      if op <= op_number(redis.call('GET', KEYS[6])) then return {-2} end
      local count = (tonumber(held[2]) or 0) + 1
      redis.call('ZADD', KEYS[3], 'GT', now + lease, reader)
      redis.call('HSET', KEYS[4], 'n:' .. reader, count, 's:' .. reader, ARGV[3])
      -- Both keys existed (prelude.lua, lengthen_expiry).
      redis.call('PEXPIRE', KEYS[3], lease, 'GT')
      redis.call('PEXPIRE', KEYS[4], lease, 'GT')
      keep_fence(KEYS[2], lease + ARGV[5])
      return {1, tonumber(held[3]), count}
    end
  end
end
--@helpers
local now = server_ms()
local reading = live_member(KEYS[3], reader, now)
if reading then
  local seq = op_number(redis.call('HGET', KEYS[4], 's:' .. reader))
  if op == seq then
    return {1, tonumber(redis.call('HGET', KEYS[4], 't:' .. reader)), tonumber(redis.call('HGET', KEYS[4], 'n:' .. reader))}
  end
  if op < seq then return {-2} end
end
if op <= op_number(redis.call('GET', KEYS[6])) then return {-2} end
local count = 1
local token
if reading and ARGV[4] == 'reenter' then
  token = tonumber(redis.call('HGET', KEYS[4], 't:' .. reader))
  -- A live member whose state is gone (evicted, deleted): its count and token went with it,
  -- so its client cannot go on as this reader. Told so before anything is written, it takes
  -- the read side afresh (its member is replaced then, or its lease ends it).
  if not token then return {-1} end
  count = redis.call('HINCRBY', KEYS[4], 'n:' .. reader, 1)
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
lengthen_expiry(KEYS[3], lease)
lengthen_expiry(KEYS[4], lease)
keep_fence(KEYS[2], lease + ARGV[5])
prune_readers(KEYS[3], KEYS[4], now)
return {1, token, count}
