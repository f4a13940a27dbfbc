-- Lower bound, NOT a lock design: the packed grant's three commands (GET, TIME, SET PX) with
-- almost no Lua (no parsing, no tombstones, a short value). Measures what the commands and
-- script entry alone cost. KEYS[1] record; ARGV as packed_acquire.lua.
local v = redis.call('GET', KEYS[1])
local t = redis.call('TIME')
if v and string.byte(v, 1) == 72 then return {0, 1} end  -- 'H': held
redis.call('SET', KEYS[1], 'H' .. ARGV[1] .. '|' .. ARGV[3] .. '|' .. t[1] .. t[2], 'PX', ARGV[2] + ARGV[5])
return {1, 1, 1}
