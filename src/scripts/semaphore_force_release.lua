-- An operator's override: take permits back whoever holds them, serve the line (serve_line), and
-- tell each holder at once on its client's inbox (inbox_of, publish.lua):
-- 'revoked-permit <permit id> 0 <permits key>'. The id is retired, as an expired one is, so
-- that a renewal or a late copy of its request never holds it again.
-- KEYS as in the prelude.
-- ARGV[1] retention ms   ARGV[2] 'all', 'one' (refused when several hold it) or 'holder':
-- only ARGV[3]'s permit
-- Returns {'free'}, {'refused', holds} or {'released', holds} (force_release.lua's answers):
-- holds is {permit id, k, 'permit', ...}.
local now = now_ms()
local retention, mode, only = tonumber(ARGV[1]), ARGV[2], ARGV[3]
prune(now, retention)
local holds, ids = {}, {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if mode ~= 'holder' or id == only then
    ids[#ids + 1] = id
    holds[#holds + 1] = id
    holds[#holds + 1] = weight(id)
    holds[#holds + 1] = 'permit'
  end
end
if #ids == 0 then return {'free'} end
if mode == 'one' and #ids > 1 then return {'refused', holds} end
local used = used_count()
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[1], id)
  used = used - weight(id)
  retire('~' .. id, now, retention)
  publish(inbox_of(id, KEYS[1]), 'revoked-permit ' .. id .. ' 0 ' .. KEYS[1])
end
set_used(used)
local limit = tonumber(redis.call('HGET', KEYS[2], 'limit'))
if limit then used = serve_line(limit, math.max(used, 0), now, retention) end
if used <= 0 then publish(KEYS[6], 'free') end
return {'released', holds}
