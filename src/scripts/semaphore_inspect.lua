-- Read a semaphore's state in one atomic step; changes nothing.
-- KEYS as in the prelude.
-- Returns {limit (0: none), permits in use, waiters in line, {permit id, lease left ms, ...}}.
-- Expired permits and waiters are left out.
local now = now_ms()
local limit = tonumber(redis.call('HGET', KEYS[2], 'limit')) or 0
local used, holders = 0, {}
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  used = used + weight(live[i])
  holders[#holders + 1] = live[i]
  holders[#holders + 1] = tonumber(live[i + 1]) - now
end
local waiting = redis.call('ZCOUNT', KEYS[4], '(' .. now, '+inf')
return {limit, used, waiting, holders}
