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
--   A free lock goes to the first in line: the caller when it is first (or nobody waits), else
--   that waiter (direct grant), and the caller is answered busy. A 'fresh' acquisition of a lock
--   directly granted to the caller confirms the grant: full lease, new operation id, same token.
-- Returns {1, token, count} when the caller holds it now, {0, pttl} when another owner does
-- ({0, pttl, arrival} when the caller stands in line: its arrival number, which names its wait),
-- {-1} for 'reenter' when the caller does not hold it any more, {-2} for a late copy of an older operation;
-- an error reply "DLOCK_KIND ..." when the name is free of exclusive holds but held otherwise
-- (by an RwLock's readers, as a Semaphore); "DLOCK_LAYOUT ..." when the lock hash is of a
-- later data layout than this script's (prelude.lua, layout).
-- Server calls (docs/design/server-work.md): a fresh grant of a free name nobody waits for 9,
-- a re-entry 4, a busy answer 3 (4 for the first one of a hold).
-- A retry with the same operation id answers as the first copy did and changes nothing, except
-- that one first answered busy may answer {-2} once the lock is free: it never grants.
-- The common paths come first and use no helper, so that a call taking one of them
-- creates none of the helpers' closures (cmake/GenerateScriptsHeader.cmake, --@helpers):
-- a fresh grant of a free name nobody waits for, a re-entry, a busy answer. Each
-- answers as the general code below would; everything else goes on to that code.
local h = redis.call('HMGET', KEYS[1], 'owner', 'count', 'seq', 'token', 'granted', 'w', 'u', 'v')
local op = tonumber(ARGV[3]) or 0
local others     -- a free name's other kinds' keys and line, once counted here
local busy_pttl  -- set here when the caller was answered busy and asks for a place in line
if not h[8] or h[8] == '2' then  -- layouts 1 and 2 (prelude.lua, layout); others are refused below
  local owner = h[1]
  if not (owner or h[2] or h[3] or h[4] or h[5] or h[6] or h[7] or h[8]) then
    -- A free name: a late copy of an operation given up never grants (replayed_acquire).
    if op <= (tonumber(redis.call('GET', KEYS[3])) or 0) then return {-2} end
    if ARGV[4] == 'reenter' then return {-1} end
    if KEYS[8] then others = redis.call('EXISTS', KEYS[4], KEYS[5], KEYS[6], KEYS[7])
    else others = redis.call('EXISTS', KEYS[4], KEYS[5], KEYS[6]) end
    if others == 0 then
      -- grant_exclusive and next_token, for a name with no hash.
      local last = tonumber(redis.call('HGET', KEYS[2], 'token'))
      local token = last and last + 1 or 0
      if ARGV[6] == '1' or not last then
        local now = redis.call('TIME')
        local now_us = tonumber(now[1]) * 1000000 + tonumber(now[2])
        if now_us > token then token = now_us end
      end
      local text = string.format('%.0f', token)
      redis.call('HSET', KEYS[2], 'token', text)
      if ARGV[7] and ARGV[7] ~= '' then
        redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'count', 1, 'seq', ARGV[3], 'token', text, 'v', '2',
                   'holder', ARGV[7])
      else
        redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'count', 1, 'seq', ARGV[3], 'token', text, 'v', '2')
      end
      redis.call('PEXPIRE', KEYS[1], ARGV[2])
      redis.call('PEXPIRE', KEYS[2], ARGV[2] + ARGV[5])
      return {1, token, 1}
    end
  elseif owner == ARGV[1] then
    if ARGV[4] == 'reenter' and op > (tonumber(h[3]) or 0) and op > (tonumber(h[7]) or 0) then
      -- reenter_exclusive
      local count = (tonumber(h[2]) or 0) + 1
      redis.call('HSET', KEYS[1], 'count', count, 'seq', ARGV[3])
      redis.call('PEXPIRE', KEYS[1], ARGV[2], 'GT')
      redis.call('PEXPIRE', KEYS[2], ARGV[2] + ARGV[5])
      return {1, tonumber(h[4]), count}
    end
  elseif owner and ARGV[4] ~= 'reenter' then
    -- Held by another owner: busy. tombstone_raised and mark_waited.
    local old = redis.call('SET', KEYS[3], ARGV[3], 'PX', ARGV[5], 'GET')
    if op <= (tonumber(old) or 0) then
      redis.call('SET', KEYS[3], old, 'PX', ARGV[5])
      return {-2}
    end
    if not h[6] then redis.call('HSET', KEYS[1], 'w', '1') end
    busy_pttl = redis.call('PTTL', KEYS[1])
    if busy_pttl < 0 then busy_pttl = tonumber(ARGV[2]) end
    if not KEYS[8] or ARGV[8] == '' then return {0, busy_pttl} end
  end
end
--@helpers
if busy_pttl then
  return {0, busy_pttl, take_place(KEYS[7], KEYS[8], KEYS[2], ARGV[1], server_ms(), tonumber(ARGV[8]), ARGV[10] == 'new')}
end
local state = lock_state(h)
local refusal = layout_refusal(state)
if refusal then return refusal end
if others then
  -- A free name whose other kinds' keys or line exist (counted above): below.
elseif state.owner and state.owner ~= ARGV[1] and ARGV[4] ~= 'reenter' then
  -- Held by another owner: busy. The tombstone check and raise in one call.
  if not tombstone_raised(KEYS[3], ARGV[3], ARGV[5]) then return {-2} end
  mark_waited(KEYS[1], state)
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl < 0 then pttl = tonumber(ARGV[2]) end
  if KEYS[8] and ARGV[8] ~= '' then
    return {0, pttl, take_place(KEYS[7], KEYS[8], KEYS[2], ARGV[1], server_ms(), tonumber(ARGV[8]), ARGV[10] == 'new')}
  end
  return {0, pttl}
end
local replayed = not others and replayed_acquire(state, KEYS[3], ARGV[1], op, ARGV[4] == 'reenter')
if replayed then return replayed end
if others then
  -- Checked above: not a late copy, not a re-entry.
elseif state.owner == ARGV[1] then
  if ARGV[4] == 'reenter' then
    return reenter_exclusive(KEYS[1], KEYS[2], state, ARGV[3], ARGV[2], ARGV[5])
  end
  if state.granted then
    return confirm_grant(KEYS[1], KEYS[2], state, ARGV[3], ARGV[2], ARGV[5], ARGV[7])
  end
  -- 'fresh' although the server still has a hold of this owner that its
  -- client no longer tracks (a release that failed in transit, a grant
  -- whose reply was lost): the new grant replaces it, count 1, new token.
elseif ARGV[4] == 'reenter' then
  return {-1}
end
-- Free (or the owner's own hold replaced: it looks at nothing else). The other
-- kinds' keys and the line in one look: a name nobody else uses has none of them.
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
    local now = server_ms()
    prune_line(KEYS[7], KEYS[8], now)
    local first = first_in_line(KEYS[7])
    if first and first ~= ARGV[1] then
      -- Others were first: the first of them gets it, and the caller waits its turn.
      grant_first_in_line(KEYS[1], KEYS[2], KEYS[7], KEYS[8], tonumber(ARGV[9]), tonumber(ARGV[5]), now)
      raise_tombstone(KEYS[3], ARGV[3], ARGV[5])
      if ARGV[8] ~= '' then
        return {0, tonumber(ARGV[9]), take_place(KEYS[7], KEYS[8], KEYS[2], ARGV[1], now, tonumber(ARGV[8]), ARGV[10] == 'new')}
      end
      return {0, tonumber(ARGV[9])}
    end
    if first then leave_line(KEYS[7], KEYS[8], ARGV[1]) end
    -- Others may still stand behind the caller: its release looks at the line.
    waited = redis.call('EXISTS', KEYS[7]) == 1
  end
end
return grant_exclusive(KEYS[1], KEYS[2], state, ARGV[1], ARGV[3], ARGV[2], ARGV[5], ARGV[6] == '1', ARGV[7], waited)
