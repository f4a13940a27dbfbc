-- An operator's override: remove the lock whoever holds it, wake its waiters, and tell
-- the holder at once on its client's inbox channel ('dlock:inbox:' + the owner's client
-- id, the part of the owner before the first ':'): 'revoked <owner> <token> <lock key>'.
-- The token names the hold, so that a notice arriving late (after the owner took the
-- lock again: the inbox is not ordered with the owner's commands) ends nothing newer.
-- KEYS[1] lock hash   KEYS[2] release channel
-- With a line (prelude.lua, "The line"): KEYS[3] fence hash   KEYS[4] line   KEYS[5] places
--   ARGV[1] grant ms   ARGV[2] retention ms: the first waiter in line is granted the lock
-- Returns {owner, count} of the removed holder, or false when the lock was free.
-- The fence (last token) is left to expire by itself, retention after the last renewal.
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner then
  return false
end
local count = tonumber(redis.call('HGET', KEYS[1], 'count'))
local token = redis.call('HGET', KEYS[1], 'token') or '0'
redis.call('DEL', KEYS[1])
if not (KEYS[5] and grant_first_in_line(KEYS[1], KEYS[3], KEYS[4], KEYS[5], tonumber(ARGV[1]), tonumber(ARGV[2]))) then
  publish(KEYS[2], 'released')
end
publish(inbox_of(owner, KEYS[1]), 'revoked ' .. owner .. ' ' .. token .. ' ' .. KEYS[1])
return {owner, count}
