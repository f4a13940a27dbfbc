-- Read a lock's state in one atomic step.
-- KEYS[1] lock hash   KEYS[2] fence hash
-- Returns {owner or false, count, pttl, holder's token, last token issued, holder's label or false}.
local owner = redis.call('HGET', KEYS[1], 'owner')
local last = tonumber(redis.call('HGET', KEYS[2], 'token')) or 0
if not owner then
  return {false, 0, -2, 0, last, false}
end
return {owner, tonumber(redis.call('HGET', KEYS[1], 'count')), redis.call('PTTL', KEYS[1]),
        tonumber(redis.call('HGET', KEYS[1], 'token')), last, redis.call('HGET', KEYS[1], 'holder')}
