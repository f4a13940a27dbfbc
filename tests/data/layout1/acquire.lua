-- Acquire a lock afresh, or re-enter one the caller holds.
-- KEYS[1] lock hash {owner, count, seq, token}   KEYS[2] fence hash {token}
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
-- (by an RwLock's readers, as a Semaphore).
-- A retry with the same operation id answers as the first copy did and changes nothing, except
-- that one first answered busy may answer {-2} once the lock is free: it never grants.
local owner = redis.call('HGET', KEYS[1], 'owner')
local replayed = replayed_acquire(KEYS[1], KEYS[3], ARGV[1], owner, op_number(ARGV[3]))
if replayed then return replayed end
if owner == ARGV[1] then
  if ARGV[4] == 'reenter' then
    return reenter_exclusive(KEYS[1], KEYS[2], ARGV[3], ARGV[2], ARGV[5])
  end
  if redis.call('HGET', KEYS[1], 'granted') then
    return confirm_grant(KEYS[1], KEYS[2], ARGV[3], ARGV[2], ARGV[5], ARGV[7])
  end
  -- 'fresh' although the server still has a hold of this owner that its
  -- client no longer tracks (a release that failed in transit, a grant
  -- whose reply was lost): the new grant replaces it, count 1, new token.
elseif ARGV[4] == 'reenter' then
  return {-1}
elseif owner then
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl < 0 then pttl = tonumber(ARGV[2]) end
  raise_tombstone(KEYS[3], ARGV[3], ARGV[5])
  if KEYS[8] and ARGV[8] ~= '' then
    return {0, pttl, take_place(KEYS[7], KEYS[8], KEYS[2], ARGV[1], server_ms(), tonumber(ARGV[8]), ARGV[10] == 'new')}
  end
  return {0, pttl}
else
  local refusal = other_kind(KEYS[4], KEYS[5], KEYS[6])
  if refusal then return refusal end
  if KEYS[8] and redis.call('EXISTS', KEYS[7]) == 1 then
    -- Free, and somebody stands in line (a lock nobody waits for has no line key).
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
  end
end
return grant_exclusive(KEYS[1], KEYS[2], ARGV[1], ARGV[3], ARGV[2], ARGV[5], ARGV[6] == '1', ARGV[7])
