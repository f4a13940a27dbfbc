-- Read everything a name holds, of every kind, in one atomic step; changes nothing.
-- KEYS[1] lock hash   KEYS[2] fence hash   KEYS[3] readers   KEYS[4] reader state
-- KEYS[5] line places (waiter -> end of its place)   KEYS[6] waiting writers
-- KEYS[7] semaphore permits   KEYS[8] semaphore state   KEYS[9] semaphore waiters' places
-- (lock_keys.hpp, semaphore_keys.hpp: one hash tag, one slot.)
-- Returns {owner or false, count, pttl, holder's token, last token issued, holder's label or false,
--   {reader, count, lease left ms, token, ...}, waiters in the line, waiting writers,
--   semaphore limit (0: none), {permit id, lease left ms, ...}, semaphore waiters}.
-- Expired readers, permits and places are left out.
local now = server_ms()
local last = tonumber(redis.call('HGET', KEYS[2], 'token')) or 0
local readers = {}
local live = redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  local r = live[i]
  local state = redis.call('HMGET', KEYS[4], 'n:' .. r, 't:' .. r)
  readers[#readers + 1] = r
  readers[#readers + 1] = tonumber(state[1]) or 1
  readers[#readers + 1] = tonumber(live[i + 1]) - now
  readers[#readers + 1] = tonumber(state[2]) or 0
end
local permits = {}
live = redis.call('ZRANGEBYSCORE', KEYS[7], '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  permits[#permits + 1] = live[i]
  permits[#permits + 1] = tonumber(live[i + 1]) - now
end
local limit = tonumber(redis.call('HGET', KEYS[8], 'limit')) or 0
local tail = {readers, live_count(KEYS[5], now), live_count(KEYS[6], now), limit, permits, live_count(KEYS[9], now)}
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner then
  return {false, 0, -2, 0, last, false, unpack(tail)}
end
return {owner, tonumber(redis.call('HGET', KEYS[1], 'count')), redis.call('PTTL', KEYS[1]),
        tonumber(redis.call('HGET', KEYS[1], 'token')), last, redis.call('HGET', KEYS[1], 'holder'), unpack(tail)}
