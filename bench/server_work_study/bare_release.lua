-- Lower bound, NOT a lock design: the packed final release's two commands (GET, SET PX) with
-- almost no Lua. KEYS[1] record; ARGV as packed_release.lua.
local v = redis.call('GET', KEYS[1])
if not v or string.find(v, ARGV[1], 2, true) ~= 2 then return -1 end
redis.call('SET', KEYS[1], 'F' .. ARGV[3], 'PX', ARGV[5])
return 0
