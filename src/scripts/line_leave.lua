-- A waiter gives up (its deadline, a stop request, an error): it leaves the line, and a lock
-- granted to it meanwhile that it has not confirmed goes on to the next in line (or is freed):
-- never a granted lock with nobody behind it.
-- KEYS[1] lock hash   KEYS[2] fence hash   KEYS[3] line   KEYS[4] places   KEYS[5] release channel
-- ARGV[1] waiter (owner id)   ARGV[2] grant ms (for the next in line)   ARGV[3] retention ms
-- ARGV[4] the arrival number of the wait that ends ('' when its client never learnt it)
-- Only that wait is touched: a copy arriving late, once the same owner waits again (or holds
-- a grant of its next wait that its client took from the notice), leaves the new place and
-- the new grant alone. Without an arrival the place goes, but no grant is given back (it
-- ends with its short lease).
-- Returns 1 when an unconfirmed grant was given back, 0 otherwise.
local score = redis.call('ZSCORE', KEYS[3], ARGV[1])
if score and (ARGV[4] == '' or score == ARGV[4]) then leave_line(KEYS[3], KEYS[4], ARGV[1]) end
if ARGV[4] == '' or redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] or
   redis.call('HGET', KEYS[1], 'granted') ~= ARGV[4] then
  return 0
end
redis.call('DEL', KEYS[1])
if not grant_first_in_line(KEYS[1], KEYS[2], KEYS[3], KEYS[4], tonumber(ARGV[2]), tonumber(ARGV[3]), nil, true) then
  keep_fence(KEYS[2], tonumber(ARGV[3]))
  publish(KEYS[5], 'released')
end
return 1
