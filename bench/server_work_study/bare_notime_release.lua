-- Lower bound, NOT a lock design: GET and SET PX, almost no Lua; the free record keeps the token.
local v = redis.call('GET', KEYS[1])
if not v then return -1 end
local token, owner = string.match(v, '^H(%d+)|([^|]*)')
if owner ~= ARGV[1] then return -1 end
redis.call('SET', KEYS[1], 'F' .. token .. '|' .. ARGV[1] .. ' ' .. ARGV[3], 'PX', ARGV[5])
return 0
