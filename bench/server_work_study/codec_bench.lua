-- Lua cost of reading and rewriting a packed record, per codec (no redis.call at all).
-- ARGV[1] codec: 'none' | 'text_match' | 'text_find' | 'struct' | 'msgpack'
-- ARGV[2] repetitions   ARGV[3] the record in that codec   ARGV[4] the caller (owner id)
-- ARGV[5] 'parse': decode and look up the caller's tombstone; 'both': also build the next record
-- (holder cleared, the caller's tombstone set: what a final release writes).
-- Every codec carries the same fields: token, deadline, flags, holder, count, seq, undone,
-- granted, spill, label, and 4 tombstone entries (owner, op).
local codec, reps, rec, me, both = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5] == 'both'
local out
if codec == 'none' then
  for _ = 1, reps do out = rec end
elseif codec == 'text_match' then
  for _ = 1, reps do
    local token, deadline, flags, holder, count, seq, undone, granted, spill, label, pos =
      string.match(rec, '^P1|(%d*)|(%d*)|(%a*)|([^|]*)|(%d*)|(%d*)|(%d*)|(%d*)|(%d*)|([^\n]*)()')
    local list = string.sub(rec, pos)
    local s, e = string.find(list, '\n' .. me .. ' ', 1, true)
    local tomb = e and tonumber(string.match(list, '^%d+', e + 1)) or 0
    if both then
      local n = string.find(list, '\n', e + 1, true)
      list = '\n' .. me .. ' ' .. (tomb + 1) .. string.sub(list, 1, s - 1) .. (n and string.sub(list, n) or '')
      out = 'P1|' .. token .. '|' .. '' .. '|' .. flags .. '|' .. '' .. '|' .. '' .. '|' .. '' .. '|' ..
            '' .. '|' .. '' .. '|' .. spill .. '|' .. '' .. list
    end
  end
elseif codec == 'text_find' then
  for _ = 1, reps do
    local f, at = {}, 1
    for i = 1, 11 do
      local nxt = string.find(rec, i < 11 and '|' or '\n', at, true)
      f[i] = string.sub(rec, at, nxt - 1)
      at = nxt + 1
    end
    local list = string.sub(rec, at - 1)
    local s, e = string.find(list, '\n' .. me .. ' ', 1, true)
    local n = string.find(list, '\n', e + 1, true)
    local tomb = tonumber(string.sub(list, e + 1, (n or 0) - 1)) or 0
    if both then
      list = '\n' .. me .. ' ' .. (tomb + 1) .. string.sub(list, 1, s - 1) .. (n and string.sub(list, n) or '')
      out = string.format('P1|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s%s', f[2], '', f[4], '', '', '', '', '', f[10], '', list)
    end
  end
elseif codec == 'struct' then
  for _ = 1, reps do
    local token, deadline, flags, holder, count, seq, undone, granted, spill, label, ntomb, pos =
      struct.unpack('<ddBsI4ddddsB', rec)
    local tombs, tomb = {}, 0
    for i = 1, ntomb do
      local o, p
      o, p, pos = struct.unpack('<sd', rec, pos)
      tombs[i] = {o, p}
      if o == me then tomb = p end
    end
    if both then
      local parts = {struct.pack('<ddBsI4ddddsB', token, 0, flags, '', 0, 0, 0, 0, spill, '', ntomb),
                     struct.pack('<sd', me, tomb + 1)}
      for i = 1, ntomb do
        if tombs[i][1] ~= me then parts[#parts + 1] = struct.pack('<sd', tombs[i][1], tombs[i][2]) end
      end
      out = table.concat(parts)
    end
  end
elseif codec == 'msgpack' then
  for _ = 1, reps do
    local r = cmsgpack.unpack(rec)
    local tombs, tomb = r[11], 0
    for i = 1, #tombs, 2 do
      if tombs[i] == me then tomb = tombs[i + 1] end
    end
    if both then
      local nt = {me, tomb + 1}
      for i = 1, #tombs, 2 do
        if tombs[i] ~= me then nt[#nt + 1] = tombs[i]; nt[#nt + 1] = tombs[i + 1] end
      end
      out = cmsgpack.pack({r[1], 0, r[3], '', 0, 0, 0, 0, r[9], '', nt})
    end
  end
end
return out and #out or 0
