-- Acquire (packed layout). KEYS[1] the name's record (packed_lib.lua); no other key is needed on
-- the common paths (the line, the other kinds' keys and spilled tombstones are named from KEYS[1]:
-- one hash tag, one slot).
-- ARGV as acquire.lua's: [1] owner [2] lease ms [3] operation id [4] 'fresh'|'reenter'
-- [5] retention ms [6] (ignored: every token is floored at the clock, TIME is read anyway) [7] label
-- Returns as acquire.lua: {1, token, count} | {0, pttl} | {-1} | {-2}.
local key, owner = KEYS[1], ARGV[1]
local op = tonumber(ARGV[3]) or 0
local lease, retention = tonumber(ARGV[2]), tonumber(ARGV[5])
local v = redis.call('GET', key)
local now, now_us = now_ms()
local token, deadline, flags, holder, count, seq, undone, granted, spill, label, list =
  '0', '0', '', '', '', '', '', '', '', '', ''
if v then
  local pos
  token, deadline, flags, holder, count, seq, undone, granted, spill, label, pos = unpack_record(v)
  if not pos then return redis.error_reply('DLOCK_LAYOUT the name is held in another data layout') end
  list = string.sub(v, pos)
end
local held = holder ~= '' and now < tonumber(deadline)
if held and holder ~= owner then
  -- Busy: raise the caller's tombstone (a late copy of this attempt never grants), mark 'w'.
  if op <= tombstone_of(key, list, owner, spill, now) then return {-2} end
  if ARGV[4] == 'reenter' then return {-1} end
  local out
  list, out = with_tombstone(list, owner, op)
  if out ~= '' then
    spill_out(key, out, retention)
    spill = now + retention
  end
  if not string.find(flags, 'w', 1, true) then flags = flags .. 'w' end
  redis.call('SET', key, pack_record(token, deadline, flags, holder, count, seq, undone, granted, spill, label, list),
             'KEEPTTL')
  return {0, tonumber(deadline) - now}
end
if held then  -- the caller's own hold
  local s = tonumber(seq)
  if op == s then return {1, tonumber(token), tonumber(count)} end
  if op < s then return {-2} end
  if ARGV[4] == 'reenter' then
    if op <= (tonumber(undone) or 0) then return {-2} end
    local c = tonumber(count) + 1
    local d = math.max(tonumber(deadline), now + lease)
    redis.call('SET', key, pack_record(token, d, flags, holder, c, op, undone, granted, spill, label, list),
               'PX', d - now + retention)
    return {1, tonumber(token), c}
  end
  if granted ~= '' then return fail_rare('confirm a direct grant') end
  -- 'fresh' over a hold its client no longer tracks: replaced below (count 1, new token).
else
  if op <= tombstone_of(key, list, owner, spill, now) then return {-2} end
  if ARGV[4] == 'reenter' then return {-1} end
  if holder ~= '' and holder ~= owner then
    -- A hold whose lease ended: a late copy of its holder's acquisition never grants again.
    local out
    list, out = with_tombstone(list, holder, seq)
    if out ~= '' then
      spill_out(key, out, retention)
      spill = now + retention
    end
  end
end
if flags ~= '' then
  if string.find(flags, 'k', 1, true) then return fail_rare('other kinds') end
  if string.find(flags, 'w', 1, true) then
    if redis.call('EXISTS', key .. ':line') == 1 then return fail_rare('the line') end
    flags = string.gsub(flags, 'w', '')
  end
end
local t = math.max((tonumber(token) or 0) + 1, now_us)
token = string.format('%.0f', t)
redis.call('SET', key, pack_record(token, now + lease, flags, owner, 1, op, '', '', spill, ARGV[7] or '', list),
           'PX', lease + retention)
return {1, t, 1}
