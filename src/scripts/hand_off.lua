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
-- Server calls (docs/design/server-work.md, "A cheaper seat"): 11 for a hand-off that places
-- nobody, 15-17 for one that places the waiter behind (24-27 before; 15 where someone was
-- answered busy for the hold and the line stands, 17 before that was told apart): the lock hash and the
-- fence hash each read and written in one call, the server clock read once for the token
-- and the arrival, and the fence's expiry set once.
local h = redis.call('HMGET', KEYS[1], 'owner', 'count', 'seq', 'granted', 'token', 'w')
local owner, count, seq, granted = h[1], h[2], h[3], h[4]
local placing = KEYS[5] and ARGV[7] and ARGV[7] ~= ''
if owner == ARGV[2] and seq == ARGV[4] then
  local token = tonumber(h[5])
  local arrival = placing and redis.call('ZSCORE', KEYS[4], ARGV[7])
  if arrival then return {1, token, tonumber(arrival)} end
  return {1, token}
end
if owner ~= ARGV[1] or count ~= '1' then
  return {0}
end
if KEYS[6] and op_number(ARGV[4]) <= op_number(redis.call('GET', KEYS[6])) then
  return {0}
end
-- A late copy of an older hand-off (the giver has acquired afresh since)
-- must not take the new hold away from it.
if op_number(ARGV[4]) <= op_number(seq) then
  return {0}
end
-- Granted to the caller from the line (its grant set no operation id of the owner's): a
-- hand-off that does not name the grant is a late copy of one sent before the wait.
if granted and granted ~= ARGV[6] then
  return {0}
end
-- The next fencing token (next_token with its clock floor) and, when placing, the new wait's
-- arrival (take_place's for a new wait): both past the fence's last one and at least the
-- server's clock in microseconds, from one read of each.
local fence = redis.call('HMGET', KEYS[2], 'token', 'arrival')
local clock = redis.call('TIME')
local now_us = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local last = tonumber(fence[1])
local token = math.max(last and last + 1 or 0, now_us)
local arrival = placing and math.max((tonumber(fence[2]) or 0) + 1, now_us)
-- The fence's HSET is the script's first write: a server out of memory refuses it, and with
-- it the whole hand-off, before anything is written. A write that frees memory first
-- (leave_line's ZREM) would let every later write through (prelude.lua, prune_readers).
if arrival then
  redis.call('HSET', KEYS[2], 'token', string.format('%.0f', token), 'arrival', string.format('%.0f', arrival))
else
  redis.call('HSET', KEYS[2], 'token', string.format('%.0f', token))
end
if KEYS[5] then leave_line(KEYS[4], KEYS[5], ARGV[2]) end
if arrival then
  local place_ms = tonumber(ARGV[8])
  redis.call('ZADD', KEYS[4], string.format('%.0f', arrival), ARGV[7])
  redis.call('ZADD', KEYS[5], math.floor(now_us / 1000) + place_ms, ARGV[7])
  -- Someone was answered busy for this hold ('w'): the line most likely stands already, with
  -- an expiry that the new place, the last to end, lengthens in one call each (lengthen_expiry).
  -- Otherwise the line is most likely new: extend_expiry sets it in two, where lengthen_expiry
  -- would take three. Either leaves the same expiry; 'w' only picks the cheaper.
  local set_expiry = h[6] and lengthen_expiry or extend_expiry
  set_expiry(KEYS[4], place_ms)
  set_expiry(KEYS[5], place_ms)
end
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
-- The fence outlives the new hold by the retention (keep_fence), and the place taken above,
-- whose arrival it counts (as take_place keeps it). Before, a second setting to lease +
-- retention alone came after take_place's and won.
keep_fence(KEYS[2], math.max(ARGV[3] + ARGV[5], arrival and tonumber(ARGV[8]) or 0))
-- The current owner's stale operations must not take the lock back later.
redis.call('SET', KEYS[3], ARGV[4], 'PX', ARGV[5])
if arrival then return {1, token, arrival} end
return {1, token}
