-- Change the limit. Holders keep what they hold (a lower limit only stops new grants until
-- enough come back); waiters are woken, since more may fit now.
-- KEYS as in the prelude.   ARGV[1] the new limit   ARGV[2] how long the state lives at least, ms
-- Returns the previous limit, or 0 when the semaphore had none.
local previous = tonumber(redis.call('HGET', KEYS[2], 'limit')) or 0
redis.call('HSET', KEYS[2], 'limit', ARGV[1])
live_for(KEYS[2], tonumber(ARGV[2]))
publish(KEYS[6], 'limit')
return previous
