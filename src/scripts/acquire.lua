-- Acquire a lock afresh, or re-enter one the caller holds.
-- KEYS[1] lock hash {owner, count, seq, token}   KEYS[2] fence hash {token}
-- KEYS[3] the owner's tombstone (the highest operation id that may no longer grant, see raise_tombstone)
-- ARGV[1] owner   ARGV[2] lease ms   ARGV[3] operation id   ARGV[4] 'fresh' or 'reenter'
-- ARGV[5] retention ms   ARGV[6] '1': floor every token at the server's clock; '0': only a new counter
-- ARGV[7] (optional) who the holder is, for operators ("host=.. pid=.. thread=.."); kept by a fresh grant only
-- Returns {1, token, count} when the caller holds it now, {0, pttl} when another owner does,
-- {-1} for 'reenter' when the caller does not hold it any more, {-2} for a late copy of an older operation.
-- A retry with the same operation id answers as the first copy did and changes nothing, except
-- that one first answered busy may answer {-2} once the lock is free: it never grants.
local owner = redis.call('HGET', KEYS[1], 'owner')
local replayed = replayed_acquire(KEYS[1], KEYS[3], ARGV[1], owner, op_number(ARGV[3]))
if replayed then return replayed end
if owner == ARGV[1] then
  if ARGV[4] == 'reenter' then
    return reenter_exclusive(KEYS[1], KEYS[2], ARGV[3], ARGV[2], ARGV[5])
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
  return {0, pttl}
end
return grant_exclusive(KEYS[1], KEYS[2], ARGV[1], ARGV[3], ARGV[2], ARGV[5], ARGV[6] == '1', ARGV[7])
