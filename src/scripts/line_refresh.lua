-- A waiting client's heartbeat for one waiter (its lease keeper sends these in batches).
-- KEYS[1] lock hash   KEYS[2] fence hash   KEYS[3] line   KEYS[4] places
-- ARGV[1] waiter (owner id)   ARGV[2] place ms (also the lease of a direct grant made here)
-- ARGV[3] retention ms
-- Keeps the waiter's place, and moves the line on when the lock is free without a release
-- (its holder's lease ran out, or a waiter it was granted to died): the first in line is granted.
-- Returns 2 when the lock was granted to this waiter from the line and none of its calls has
-- named the grant yet (a grant notice it may have missed), 1 when it is still in line, 0 when
-- it is not (its place ran out): its client asks again.
local now_us = server_us()
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner == ARGV[1] and redis.call('HGET', KEYS[1], 'granted') then return 2 end
prune_line(KEYS[3], KEYS[4], ms_of(now_us))
if not owner and grant_first_in_line(KEYS[1], KEYS[2], KEYS[3], KEYS[4], tonumber(ARGV[2]), tonumber(ARGV[3]),
                                     now_us) == ARGV[1] then
  return 2
end
if not redis.call('ZSCORE', KEYS[3], ARGV[1]) then return 0 end
take_place(KEYS[3], KEYS[4], KEYS[2], ARGV[1], now_us, tonumber(ARGV[2]))
return 1
