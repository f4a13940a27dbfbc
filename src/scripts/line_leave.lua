-- A waiter gives up (its deadline, a stop request, an error): it leaves the line, and a lock
-- granted to it meanwhile that it has not confirmed goes on to the next in line (or is freed):
-- never a granted lock with nobody behind it.
-- KEYS[1] lock hash   KEYS[2] fence hash   KEYS[3] line   KEYS[4] places   KEYS[5] release channel
-- ARGV[1] waiter (owner id)   ARGV[2] grant ms (for the next in line)   ARGV[3] retention ms
-- Returns 1 when an unconfirmed grant was given back, 0 otherwise.
leave_line(KEYS[3], KEYS[4], ARGV[1])
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] or not redis.call('HGET', KEYS[1], 'granted') then
  return 0
end
redis.call('DEL', KEYS[1])
keep_fence(KEYS[2], tonumber(ARGV[3]))
if not grant_first_in_line(KEYS[1], KEYS[2], KEYS[3], KEYS[4], tonumber(ARGV[2]), tonumber(ARGV[3])) then
  redis.call('PUBLISH', KEYS[5], 'released')
end
return 1
