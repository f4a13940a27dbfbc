-- A waiter took a direct grant of a fixed lease (never renewed) as held from its notice and
-- confirms it: the full lease from now (or the grant's own, if that ends later), an operation
-- id newer than any earlier request of this owner, and its label. A renewed lease needs no
-- confirmation: its renewals give it the full lease, and its releases name the grant by its
-- arrival, which no late copy of an older release can (release.lua).
-- KEYS[1] lock hash   KEYS[2] fence hash
-- ARGV[1] owner   ARGV[2] lease ms   ARGV[3] operation id   ARGV[4] retention ms
-- ARGV[5] the arrival number of the wait the grant was for   ARGV[6] who the holder is, for operators
-- Returns {1, token, 1} when confirmed (also for a resent copy of a confirmation that applied),
-- {0} when the grant is not there any more (expired, given back, force-released): lost.
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner ~= ARGV[1] then return {0} end
if redis.call('HGET', KEYS[1], 'granted') == ARGV[5] then
  -- Never shorter than the grant's own lease: the client counts its
  -- validity from its place (a waiter_lease that may be longer than the
  -- lease), and the lease from this request, whichever ends later.
  redis.call('HDEL', KEYS[1], 'granted')
  redis.call('HSET', KEYS[1], 'seq', ARGV[3])
  if ARGV[6] ~= '' then redis.call('HSET', KEYS[1], 'holder', ARGV[6]) end
  redis.call('PEXPIRE', KEYS[1], ARGV[2], 'GT')
  extend_expiry(KEYS[2], redis.call('PTTL', KEYS[1]) + tonumber(ARGV[4]))
  return {1, tonumber(redis.call('HGET', KEYS[1], 'token')), 1}
end
if not redis.call('HGET', KEYS[1], 'granted') and redis.call('HGET', KEYS[1], 'seq') == ARGV[3] then
  return {1, tonumber(redis.call('HGET', KEYS[1], 'token')), 1}
end
return {0}
