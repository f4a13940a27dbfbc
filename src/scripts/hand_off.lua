-- Hand a held lock straight to the next owner, a waiter in the same process:
-- no release, no release message, no race with other processes.
-- KEYS[1] lock hash   KEYS[2] fence hash   KEYS[3] the current owner's release tombstone
-- ARGV[1] current owner   ARGV[2] next owner   ARGV[3] next owner's lease ms   ARGV[4] operation id
-- ARGV[5] retention ms
-- ARGV[6] (optional) the arrival number of the wait whose direct grant the current owner holds
--   ('granted', prelude.lua; release.lua): a hand-off of that grant names it
-- KEYS[4] line   KEYS[5] places (prelude.lua, "The line"): the next owner leaves the line
-- KEYS[6] (optional) the next owner's tombstone: an undo of this hand-off that came first
--   (release.lua ARGV[6], sent when its answer was lost) raised it past ARGV[4], and a late
--   copy of the hand-off must then not give the next owner a lock nobody waits for
-- ARGV[7] (optional) the waiter of the same process behind the next owner, ARGV[8] its place
--   ms: it takes a place at the end of the line for a new wait (take_place), as its own first
--   attempt would when its turn in the process comes, so that it then sleeps at once
-- Returns {1, token} with the next owner's new fencing token ({1, token, arrival} with the
-- arrival number of the waiter placed), or {0} when the caller does not hold the lock exactly
-- once (lost, or still re-entered).
-- A retry with the same operation id answers as the first copy did (the waiter's arrival read
-- back from the line).
local owner = redis.call('HGET', KEYS[1], 'owner')
local placing = KEYS[5] and ARGV[7] and ARGV[7] ~= ''
if owner == ARGV[2] and redis.call('HGET', KEYS[1], 'seq') == ARGV[4] then
  local token = tonumber(redis.call('HGET', KEYS[1], 'token'))
  local arrival = placing and redis.call('ZSCORE', KEYS[4], ARGV[7])
  if arrival then return {1, token, tonumber(arrival)} end
  return {1, token}
end
if owner ~= ARGV[1] or redis.call('HGET', KEYS[1], 'count') ~= '1' then
  return {0}
end
if KEYS[6] and op_number(ARGV[4]) <= op_number(redis.call('GET', KEYS[6])) then
  return {0}
end
-- A late copy of an older hand-off (the giver has acquired afresh since)
-- must not take the new hold away from it.
if op_number(ARGV[4]) <= op_number(redis.call('HGET', KEYS[1], 'seq')) then
  return {0}
end
-- Granted to the caller from the line (its grant set no operation id of the owner's): a
-- hand-off that does not name the grant is a late copy of one sent before the wait.
local granted = redis.call('HGET', KEYS[1], 'granted')
if granted and granted ~= ARGV[6] then
  return {0}
end
local token = next_token(KEYS[2], true)
if KEYS[5] then leave_line(KEYS[4], KEYS[5], ARGV[2]) end
local arrival = placing and take_place(KEYS[4], KEYS[5], KEYS[2], ARGV[7], server_ms(), tonumber(ARGV[8]), true)
-- The giver's undone operations ('u') are not the next owner's.
if granted then redis.call('HDEL', KEYS[1], 'granted') end
-- Someone stands in line: the next owner's release looks at it (mark_waited). The place's
-- arrival ('sa') names it for an undo of this hand-off (release.lua ARGV[9]).
if arrival then
  redis.call('HSET', KEYS[1], 'owner', ARGV[2], 'count', 1, 'seq', ARGV[4], 'token', string.format('%.0f', token),
             'u', '0', 'v', layout, 'w', '1', 'sa', string.format('%.0f', arrival))
else
  redis.call('HSET', KEYS[1], 'owner', ARGV[2], 'count', 1, 'seq', ARGV[4], 'token', string.format('%.0f', token),
             'u', '0', 'v', layout)
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
keep_fence(KEYS[2], ARGV[3] + ARGV[5])
-- The current owner's stale operations must not take the lock back later.
redis.call('SET', KEYS[3], ARGV[4], 'PX', ARGV[5])
if arrival then return {1, token, arrival} end
return {1, token}
