-- Lower bound, NOT a lock design: GET and SET PX only (TIME read only when the record is
-- missing), almost no Lua. KEYS[1] record; ARGV as packed_acquire.lua.
local v = redis.call('GET', KEYS[1])
local token
if v then
  if string.byte(v, 1) == 72 then return {0, 1} end  -- 'H': held
  token = tonumber(string.match(v, '^F(%d+)')) + 1
else
  local t = redis.call('TIME')
  token = t[1] * 1000000 + t[2]
end
redis.call('SET', KEYS[1], 'H' .. string.format('%.0f', token) .. '|' .. ARGV[1] .. '|' .. ARGV[3], 'PX', ARGV[2] + ARGV[5])
return {1, token, 1}
