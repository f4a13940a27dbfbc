-- Read-write lock: take the write side afresh, or re-enter it.
-- KEYS[1] writer hash (a Lock's lock hash: prelude.lua, read_lock)   KEYS[2] fence hash {token}
-- KEYS[3] the owner's write tombstone   KEYS[4] readers: sorted set reader -> server-time deadline (ms)
-- KEYS[5] reader state hash {n:<reader> count, s:<reader> last operation, t:<reader> token}
-- KEYS[6] waiting writers: sorted set writer -> server-time deadline (ms)
-- KEYS[7] semaphore permits   KEYS[8] semaphore waiters: a semaphore of this name (prelude.lua, other_kind)
-- ARGV[1] owner   ARGV[2] lease ms   ARGV[3] operation id   ARGV[4] 'wait', 'try' or 'reenter'
-- ARGV[5] retention ms   ARGV[6] who the holder is, for operators (kept by a fresh grant)
-- 'wait': an attempt of a writer that will wait. When it must wait, it is marked as a
-- waiting writer until now + lease (server time): new readers queue behind it
-- (rw_read_acquire.lua) until it gets the lock, withdraws (rw_write_withdraw.lua), or
-- its mark runs out because its client stopped refreshing it. 'try': one attempt, no mark.
-- The caller's own read hold does not count against it (an upgrade; the client only tries it).
-- Returns {1, token, count} when the caller holds the write side now, {0, ms} when it must
-- wait (ms: until the writer's lease or the first reader's ends), {-1} for 'reenter' when the
-- caller no longer holds it, {-2} for a late copy of an older operation (acquire.lua's answers);
-- "DLOCK_KIND ..." when the name is held as a Semaphore. The write side is the lock hash a Lock
-- uses too: the two exclude each other as one kind (prelude.lua, kind_error); "DLOCK_LAYOUT ..."
-- as acquire.lua. Server calls (docs/design/server-work.md): a fresh grant of a name nobody
-- else uses 9 (was 14).
-- The common path first, with the few helpers it uses (acquire.lua): a fresh grant of a
-- name nobody uses otherwise (no lock hash, no reader, no waiting writer, no semaphore).
local h = redis.call('HMGET', KEYS[1], 'owner', 'count', 'seq', 'token', 'granted', 'w', 'u', 'v')
local checked  -- a free name's replay checked here
if not (h[1] or h[2] or h[3] or h[4] or h[5] or h[6] or h[7] or h[8]) then
  -- A late copy of an operation given up never grants (replayed_acquire).
  if op_number(ARGV[3]) <= op_number(redis.call('GET', KEYS[3])) then return {-2} end
  if ARGV[4] == 'reenter' then return {-1} end
  if redis.call('EXISTS', KEYS[4], KEYS[6], KEYS[7], KEYS[8]) == 0 then
    -- Marked waited from the start, as below.
    return write_grant(KEYS[1], KEYS[2], ARGV[1], ARGV[3], ARGV[2], ARGV[5], true, ARGV[6], true)
  end
  checked = true
end
--@helpers
local state = lock_state(h)
local refusal = layout_refusal(state)
if refusal then return refusal end
local owner = state.owner
local replayed = not checked and replayed_acquire(state, KEYS[3], ARGV[1], op_number(ARGV[3]), ARGV[4] == 'reenter')
if replayed then return replayed end
local now = server_ms()
local function must_wait(ms)
  raise_tombstone(KEYS[3], ARGV[3], ARGV[5])
  if ARGV[4] == 'wait' then
    redis.call('ZADD', KEYS[6], now + tonumber(ARGV[2]), ARGV[1])
    -- After the mark (a write refused when Redis is out of memory): the
    -- marks of writers that died waiting leave, so the set cannot grow.
    redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', now)
    extend_expiry(KEYS[6], ARGV[2])
  end
  return {0, ms}
end
-- A Lock's direct grant to the same owner id that no call of its has named yet ('granted',
-- prelude.lua) is not the write side's own: it never takes it over or re-enters it (a call of
-- the owner's from before that wait could), and waits as for another owner's hold.
if owner == ARGV[1] and not state.granted then
  if ARGV[4] == 'reenter' then
    return reenter_exclusive(KEYS[1], KEYS[2], state.count, state.token, ARGV[3], ARGV[2], ARGV[5])
  end
elseif ARGV[4] == 'reenter' then
  return {-1}
elseif owner then
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl < 0 then pttl = tonumber(ARGV[2]) end
  mark_waited(KEYS[1], state)
  return must_wait(pttl)
end
if not owner then
  refusal = other_kind(nil, KEYS[7], KEYS[8])
  if refusal then return refusal end
end
local others = live_count(KEYS[4], now)
if live_member(KEYS[4], ARGV[1], now) then others = others - 1 end
if others > 0 then
  return must_wait(first_deadline_in(KEYS[4], now, ARGV[1]) or tonumber(ARGV[2]))
end
-- Marked waited from the start: readers queued behind this writer's waiting mark
-- (rw_read_acquire.lua) wait for its release's message.
local granted = grant_exclusive(KEYS[1], KEYS[2], state, ARGV[1], ARGV[3], ARGV[2], ARGV[5], true, ARGV[6], true)
redis.call('ZREM', KEYS[6], ARGV[1])
prune_readers(KEYS[4], KEYS[5], now)
return granted
