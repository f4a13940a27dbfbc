-- An operator's override: remove holds of a Lock or an RwLock (its writer, its readers)
-- whoever holds them, wake the waiters, and tell each holder at once on its client's inbox
-- (inbox_of, publish.lua): 'revoked <owner> <token> <lock key>' for the exclusive hold,
-- 'revoked-read <owner> <token> <lock key>' for a reader. The token names the hold, so that
-- a notice arriving late (after the owner took the lock again: the inbox is not ordered with
-- the owner's commands) ends nothing newer.
-- KEYS[1] lock hash   KEYS[2] release channel   KEYS[3] fence hash   KEYS[4] line   KEYS[5] places
-- KEYS[6] readers   KEYS[7] reader state
-- ARGV[1] grant ms   ARGV[2] retention ms: when the exclusive hold goes, the first waiter in
--   line (prelude.lua, "The line") is granted the lock
-- ARGV[3] 'all': every hold; 'one': the only hold, refused when there are several;
--   'holder': only ARGV[4]'s (an owner id)
-- Returns {'free'} when nothing was held (by ARGV[4]); {'refused', holds} for 'one' when several
-- hold it; else {'released', holds}: holds is {holder, count, 'lock' | 'read', ...} ('lock': the
-- exclusive hold, a Lock's or an RwLock's writer).
-- The fence (last token) is left to expire by itself, retention after the last renewal.
local now_us = server_us()
local now = ms_of(now_us)
local mode, only = ARGV[3], ARGV[4]
local owner = redis.call('HGET', KEYS[1], 'owner')
local holds = {}
if owner and (mode ~= 'holder' or owner == only) then
  holds[#holds + 1] = owner
  holds[#holds + 1] = tonumber(redis.call('HGET', KEYS[1], 'count'))
  holds[#holds + 1] = 'lock'
end
local readers = {}
for _, reader in ipairs(redis.call('ZRANGEBYSCORE', KEYS[6], '(' .. now, '+inf')) do
  if mode ~= 'holder' or reader == only then
    readers[#readers + 1] = reader
    holds[#holds + 1] = reader
    holds[#holds + 1] = tonumber(redis.call('HGET', KEYS[7], 'n:' .. reader)) or 1
    holds[#holds + 1] = 'read'
  end
end
if #holds == 0 then return {'free'} end
if mode == 'one' and #holds > 3 then return {'refused', holds} end
if owner and holds[1] == owner and holds[3] ~= 'read' then
  local token = redis.call('HGET', KEYS[1], 'token') or '0'
  redis.call('DEL', KEYS[1])
  if not grant_first_in_line(KEYS[1], KEYS[3], KEYS[4], KEYS[5], tonumber(ARGV[1]), tonumber(ARGV[2]), now_us,
                             true) then
    publish(KEYS[2], 'released')
  end
  publish(inbox_of(owner, KEYS[1]), 'revoked ' .. owner .. ' ' .. token .. ' ' .. KEYS[1])
end
for _, reader in ipairs(readers) do
  local token = redis.call('HGET', KEYS[7], 't:' .. reader) or '0'
  redis.call('ZREM', KEYS[6], reader)
  redis.call('HDEL', KEYS[7], 'n:' .. reader, 's:' .. reader, 't:' .. reader)
  publish(inbox_of(reader, KEYS[1]), 'revoked-read ' .. reader .. ' ' .. token .. ' ' .. KEYS[1])
end
if #readers > 0 and live_count(KEYS[6], now) == 0 then publish(KEYS[2], 'released') end
return {'released', holds}
