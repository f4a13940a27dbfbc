-- A waiter took a direct grant as held from its notice and confirms it: the full lease from
-- now, and an operation id newer than any earlier request of this owner, so that a late copy
-- of an older release or hand-off of the owner can no longer apply (release.lua compares ids).
-- KEYS[1] lock hash   KEYS[2] fence hash
-- ARGV[1] owner   ARGV[2] lease ms   ARGV[3] operation id   ARGV[4] retention ms
-- ARGV[5] the arrival number of the wait the grant was for   ARGV[6] who the holder is, for operators
-- Returns {1, token, 1} when confirmed (also for a resent copy of a confirmation that applied),
-- {0} when the grant is not there any more (expired, given back, force-released): lost.
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner ~= ARGV[1] then return {0} end
if redis.call('HGET', KEYS[1], 'granted') == ARGV[5] then
  return confirm_grant(KEYS[1], KEYS[2], ARGV[3], ARGV[2], ARGV[4], ARGV[6])
end
if not redis.call('HGET', KEYS[1], 'granted') and redis.call('HGET', KEYS[1], 'seq') == ARGV[3] then
  return {1, tonumber(redis.call('HGET', KEYS[1], 'token')), 1}
end
return {0}
