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
local op = op_number(ARGV[3])
if owner == ARGV[1] then
  local seq = op_number(redis.call('HGET', KEYS[1], 'seq'))
  if op == seq then
    return {1, tonumber(redis.call('HGET', KEYS[1], 'token')), tonumber(redis.call('HGET', KEYS[1], 'count'))}
  end
  if op < seq then return {-2} end
end
-- An operation its client gave up on (answered busy, or undone after its
-- outcome stayed unknown) never applies, however late a copy arrives.
if op <= op_number(redis.call('GET', KEYS[3])) then return {-2} end
if owner == ARGV[1] then
  if ARGV[4] == 'reenter' then
    local count = redis.call('HINCRBY', KEYS[1], 'count', 1)
    redis.call('HSET', KEYS[1], 'seq', ARGV[3])
    redis.call('PEXPIRE', KEYS[1], ARGV[2], 'GT')
    keep_fence(KEYS[2], ARGV[2] + ARGV[5])
    return {1, tonumber(redis.call('HGET', KEYS[1], 'token')), count}
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
local token = next_token(KEYS[2], ARGV[6] == '1')
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'count', 1, 'seq', ARGV[3], 'token', string.format('%.0f', token))
if ARGV[7] and ARGV[7] ~= '' then redis.call('HSET', KEYS[1], 'holder', ARGV[7]) end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
keep_fence(KEYS[2], ARGV[2] + ARGV[5])
return {1, token, 1}
