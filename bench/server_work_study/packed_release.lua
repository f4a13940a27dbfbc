-- Release (packed layout). KEYS[1] the name's record; the release channel is KEYS[1]..':ch'
-- and the line KEYS[1]..':line' (looked at only when 'w' says someone was answered busy).
-- ARGV as release.lua's: [1] owner [2] lease ms [3] operation id [4] how many holds, or 'all'
-- [5] retention ms [6] undoing (an operation id, or '') [7] grant ms
-- [8] '1': strict (TIME read: a hold whose lease ended on the server answers -1, as a missing
--     hash does today); '0': the owner's record is released even past its lease (nobody else
--     took it meanwhile: the record still names this owner)
-- Returns as release.lua: holds left | -1 | -2.
local key, owner = KEYS[1], ARGV[1]
local op = tonumber(ARGV[3]) or 0
local v = redis.call('GET', key)
if not v then
  if ARGV[6] and ARGV[6] ~= '' then return fail_rare('undo with no record') end
  return -1
end
local token, deadline, flags, holder, count, seq, undone, granted, spill, label, pos = unpack_record(v)
if not pos then return redis.error_reply('DLOCK_LAYOUT the name is held in another data layout') end
local list = string.sub(v, pos)
local now
local mine = holder == owner
if mine and ARGV[8] == '1' then
  now = now_ms()
  mine = now < tonumber(deadline)
end
if not mine then
  -- A retry of this owner's final release answers as the first copy did.
  local _, e = string.find(list, '\n' .. owner .. ' ', 1, true)
  if e and tonumber(string.match(list, '^%d+', e + 1)) == op then return 0 end
  if ARGV[6] and ARGV[6] ~= '' then return fail_rare('undo of an operation that has not applied') end
  return -1
end
if granted ~= '' then return fail_rare('release of an unconfirmed direct grant') end
local s = tonumber(seq)
if op == s then return tonumber(count) end
if op < s then return -2 end
if ARGV[6] and ARGV[6] ~= '' and tonumber(ARGV[6]) ~= s then return fail_rare('undo of an older operation') end
local retention = tonumber(ARGV[5])
local left = 0
if ARGV[4] ~= 'all' then left = tonumber(count) - tonumber(ARGV[4]) end
if left > 0 then
  now = now or now_ms()
  local d = math.max(tonumber(deadline), now + tonumber(ARGV[2]))
  redis.call('SET', key, pack_record(token, d, flags, holder, left, op, undone, granted, spill, label, list),
             'PX', d - now + retention)
  return left
end
-- Final: a free record keeps the token counter and the releaser's tombstone for retention.
local out
list, out = with_tombstone(list, owner, op)
if out ~= '' then
  now = now or now_ms()
  spill_out(key, out, retention)
  spill = now + retention
end
if flags ~= '' and string.find(flags, 'w', 1, true) then
  if redis.call('EXISTS', key .. ':line') == 1 then return fail_rare('direct grant to the line') end
  redis.call('PUBLISH', key .. ':ch', 'released')
  flags = string.gsub(flags, 'w', '')
end
redis.call('SET', key, pack_record(token, '', flags, '', '', '', '', '', spill, '', list), 'PX', retention)
return 0
