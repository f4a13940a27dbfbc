-- The floor's unlock (bench/floor_runner.cpp): delete the lock's key only if
-- it still holds this acquisition's token. KEYS[1] the lock, ARGV[1] the token.
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
