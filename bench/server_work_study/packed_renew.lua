-- Renew (packed layout). KEYS[1] the name's record.
-- ARGV as renew.lua's: [1] owner [2] lease ms [3] retention ms [4] Redlock take-back (rare: not here)
-- Returns 1 when extended, 0 when the caller no longer holds it.
local key = KEYS[1]
local v = redis.call('GET', key)
if not v then return 0 end
local token, deadline, flags, holder, count, seq, undone, granted, spill, label, pos = unpack_record(v)
if not pos or holder ~= ARGV[1] then return 0 end
local now = now_ms()
if now >= tonumber(deadline) then return 0 end
local d = math.max(tonumber(deadline), now + tonumber(ARGV[2]))
redis.call('SET', key, pack_record(token, d, flags, holder, count, seq, undone, granted, spill, label,
                                   string.sub(v, pos)), 'PX', d - now + tonumber(ARGV[3]))
return 1
