-- The storage's fenced write: accepted only if the writer's fencing token is
-- not below the largest one the storage has seen. Every write is recorded,
-- accepted or not, for the checker.
-- KEYS[1] the largest token seen   KEYS[2] accepted writes   KEYS[3] rejected writes
-- ARGV[1] token   ARGV[2] writer
local largest = tonumber(redis.call('GET', KEYS[1]) or '0')
local token = tonumber(ARGV[1])
local entry = ARGV[1] .. ' ' .. ARGV[2]
if token >= largest then
  redis.call('SET', KEYS[1], ARGV[1])
  redis.call('RPUSH', KEYS[2], entry)
  return 1
end
redis.call('RPUSH', KEYS[3], entry)
return 0
