-- Acquire a lock afresh, or re-enter one the caller holds.
-- KEYS[1] lock hash {owner, count, seq, token, holder, granted, w, u, v} (prelude.lua, layout)   KEYS[2] fence hash {token}
-- KEYS[3] the owner's tombstone (the highest operation id that may no longer grant, see raise_tombstone)
-- ARGV[1] owner   ARGV[2] lease ms   ARGV[3] operation id   ARGV[4] 'fresh' or 'reenter'
-- ARGV[5] retention ms   ARGV[6] '1': floor every token at the server's clock; '0': only a new counter
-- ARGV[7] (optional) who the holder is, for operators ("host=.. pid=.. thread=.."); kept by a fresh grant only
-- KEYS[4] readers   KEYS[5] semaphore permits   KEYS[6] semaphore waiters: the other kinds'
--   keys of this name (lock_keys.hpp), looked at only when the name is free (other_kind)
-- With a line (prelude.lua, "The line"): KEYS[7] line   KEYS[8] places
--   ARGV[8] place ms: when busy, take (or keep) a place in line for that long; '' for none (try_lock)
--   ARGV[9] grant ms: the lease of a direct grant this call makes to the first waiter
--   ARGV[10] 'new' for the first attempt of a wait: its place gets a new arrival number
-- ARGV[11] (optional) the arrival number of a wait: for 'reenter', the wait whose direct grant
--   the caller holds ('granted', prelude.lua; release.lua); for 'fresh', the caller's wait in
--   line, when its client knows it: a grant to that wait is confirmed
--   A free lock goes to the first in line: the caller when it is first (or nobody waits), else
--   that waiter (direct grant), and the caller is answered busy. A 'fresh' acquisition of a lock
--   directly granted to the caller confirms the grant when it names the grant's wait (a waiter
--   that missed its notice): full lease, same token, the grant still named (prelude.lua,
--   confirm_grant). One that does not (a
--   late copy of a call sent before the wait, or a waiter that never learnt its arrival) is
--   answered busy, without a place: the grant's client may hold it from the notice.
-- Returns {1, token, count} when the caller holds it now, {0, pttl} when another owner does
-- ({0, pttl, arrival} when the caller stands in line: its arrival number, which names its wait),
-- {-1} for 'reenter' when the caller does not hold it any more, {-2} for a late copy of an older operation;
-- an error reply "DLOCK_KIND ..." when the name is free of exclusive holds but held otherwise
-- (by an RwLock's readers, as a Semaphore); "DLOCK_LAYOUT ..." when the lock hash is of a
-- later data layout than this script's (prelude.lua, layout).
-- Server calls (docs/design/server-work.md): a fresh grant of a free name nobody waits for 9,
-- a re-entry 4, a busy answer 3 (4 for the first one of a hold), a new wait answered busy
-- with a place at the end of a line of others 11, the first waiter of a hold 14.
-- A retry with the same operation id answers as the first copy did and changes nothing, except
-- that one first answered busy may answer {-2} once the lock is free: it never grants.
-- The common paths come first, with the few helpers they use: a call taking one creates
-- none of the others' closures (cmake/GenerateScriptsHeader.cmake, --@helpers): a busy
-- answer, a fresh grant of a free name nobody waits for, a re-entry. Each answers as the
-- general code below would; everything else goes on to that code.
local h = redis.call('HMGET', KEYS[1], 'owner', 'count', 'seq', 'token', 'granted', 'w', 'u', 'v')
local op = op_number(ARGV[3])
local others     -- a free name's other kinds' keys and line, once counted here
local busy_pttl  -- set here when the caller was answered busy and asks for a place in line
if not h[8] or (tonumber(h[8]) or layout + 1) <= layout then  -- else refused below (layout_refusal)
  local owner = h[1]
  if owner and owner ~= ARGV[1] and ARGV[4] ~= 'reenter' then
    -- Held by another owner: busy. The tombstone check and raise in one call; mark_waited.
    if not tombstone_raised(KEYS[3], ARGV[3], ARGV[5]) then return {-2} end
    if not h[6] then redis.call('HSET', KEYS[1], 'w', '1') end
    busy_pttl = redis.call('PTTL', KEYS[1])
    if busy_pttl < 0 then busy_pttl = tonumber(ARGV[2]) end
    if not KEYS[8] or ARGV[8] == '' then return {0, busy_pttl} end
  elseif not (owner or h[2] or h[3] or h[4] or h[5] or h[6] or h[7] or h[8]) then
    -- A free name: a late copy of an operation given up never grants (replayed_acquire).
    if op <= op_number(redis.call('GET', KEYS[3])) then return {-2} end
    if ARGV[4] == 'reenter' then return {-1} end
    -- The other kinds' keys and the line in one look: a name nobody else uses has none of them.
    if KEYS[8] then others = redis.call('EXISTS', KEYS[4], KEYS[5], KEYS[6], KEYS[7])
    else others = redis.call('EXISTS', KEYS[4], KEYS[5], KEYS[6]) end
    if others == 0 then
      return write_grant(KEYS[1], KEYS[2], ARGV[1], ARGV[3], ARGV[2], ARGV[5], ARGV[6] == '1', ARGV[7], false)
    end
  elseif owner == ARGV[1] and ARGV[4] == 'reenter' and not h[5] and op > op_number(h[3]) and op > op_number(h[7]) then
    return reenter_exclusive(KEYS[1], KEYS[2], tonumber(h[2]) or 0, tonumber(h[4]), ARGV[3], ARGV[2], ARGV[5])
  end
end
--@helpers
if busy_pttl then
  -- (No 'w' yet: nobody was answered busy for this hold, so the line is most likely new.)
  return {0, busy_pttl, take_place(KEYS[7], KEYS[8], KEYS[2], ARGV[1], server_us(), tonumber(ARGV[8]), ARGV[10] == 'new',
                                   not h[6])}
end
local state = lock_state(h)
local refusal = layout_refusal(state)
if refusal then return refusal end
-- Here the lock is not held by another owner (answered busy above), unless a re-entry asks.
if not others then
  local replayed = replayed_acquire(state, KEYS[3], ARGV[1], op, ARGV[4] == 'reenter')
  if replayed then return replayed end
  if state.owner == ARGV[1] then
    if ARGV[4] == 'reenter' then
      if state.granted then
        -- Granted from the line (no operation id of the owner's set): a re-entry that does
        -- not name the grant is a late copy of one sent before the wait. One that does gives
        -- the hold its operation id, as a release would.
        if state.granted ~= ARGV[11] then return {-2} end
        redis.call('HDEL', KEYS[1], 'granted')
      end
      return reenter_exclusive(KEYS[1], KEYS[2], state.count, state.token, ARGV[3], ARGV[2], ARGV[5])
    end
    if state.granted then
      if state.granted == ARGV[11] then
        return confirm_grant(KEYS[1], KEYS[2], state, ARGV[2], ARGV[5], ARGV[7])
      end
      -- Not named: busy until the grant is named or its short lease ends. No place is taken:
      -- a late copy would leave one in line that nobody refreshes, and may be granted to.
      raise_tombstone(KEYS[3], ARGV[3], ARGV[5])
      local pttl = redis.call('PTTL', KEYS[1])
      if pttl < 0 then pttl = tonumber(ARGV[2]) end
      return {0, pttl}
    end
    -- 'fresh' although the server still has a hold of this owner that its
    -- client no longer tracks (a release that failed in transit, a grant
    -- whose reply was lost): the new grant replaces it, count 1, new token.
  elseif ARGV[4] == 'reenter' then
    return {-1}
  end
end
-- Free (or the owner's own hold replaced: it looks at nothing else).
local waited = state.waited and true or false  -- a replaced hold's waiters still wait
if not state.owner then
  if not others then
    if KEYS[8] then others = redis.call('EXISTS', KEYS[4], KEYS[5], KEYS[6], KEYS[7])
    else others = redis.call('EXISTS', KEYS[4], KEYS[5], KEYS[6]) end
  end
  if others > 0 then
    refusal = other_kind(KEYS[4], KEYS[5], KEYS[6])
    if refusal then return refusal end
  end
  if others > 0 and KEYS[8] and redis.call('EXISTS', KEYS[7]) == 1 then
    -- Somebody stands in line (a lock nobody waits for has no line key).
    local now_us = server_us()
    prune_line(KEYS[7], KEYS[8], ms_of(now_us))
    local first = first_in_line(KEYS[7])
    if first and first ~= ARGV[1] then
      -- Others were first: the first of them gets it, and the caller waits its turn.
      grant_first_in_line(KEYS[1], KEYS[2], KEYS[7], KEYS[8], tonumber(ARGV[9]), tonumber(ARGV[5]), now_us)
      raise_tombstone(KEYS[3], ARGV[3], ARGV[5])
      if ARGV[8] ~= '' then
        return {0, tonumber(ARGV[9]), take_place(KEYS[7], KEYS[8], KEYS[2], ARGV[1], now_us, tonumber(ARGV[8]), ARGV[10] == 'new')}
      end
      return {0, tonumber(ARGV[9])}
    end
    if first then leave_line(KEYS[7], KEYS[8], ARGV[1]) end
    -- Others may still stand behind the caller: its release looks at the line.
    waited = redis.call('EXISTS', KEYS[7]) == 1
  end
end
return grant_exclusive(KEYS[1], KEYS[2], state, ARGV[1], ARGV[3], ARGV[2], ARGV[5], ARGV[6] == '1', ARGV[7], waited)
