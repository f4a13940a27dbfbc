-- Packed layout (prototype): the whole state of a name in one string key, KEYS[1] = dlock:{NAME}.
-- For EVALSHA this file is placed in front of each packed_*.lua; for FCALL it is the library's
-- top level, defined once at FUNCTION LOAD.
--
-- Value (text codec): a header of fixed fields separated by '|', then the tombstone list:
--   P1|token|deadline|flags|holder|count|seq|undone|granted|spill|label
--   followed by zero or more "\n<owner> <op>" entries, newest first, at most TOMBS of them.
--   token    last fencing token issued for the name (decimal)
--   deadline server ms at which the holder's lease ends ('' when free)
--   flags    'w': someone was answered busy while held (the release looks at the line)
--            'k': another kind (RwLock readers, Semaphore) may hold the name: look before granting
--   holder   owner id of the hold ('' when free); count, seq (its last operation id), undone ('u')
--   granted  arrival number of an unconfirmed direct grant ('' otherwise)
--   spill    server ms until which tombstones pushed out of the list may live in keys of their own
--            (KEYS[1]..':done:'..owner); '' when none were ever pushed out
--   label    who holds it, for operators
-- The key's expiry: lease + retention while held (renewed with the lease), retention once free.
-- So a holder that died leaves the token counter and the tombstones for retention after its lease.

local TOMBS = 4

local function unpack_record(v)
  return string.match(v, '^P1|(%d*)|(%d*)|(%a*)|([^|]*)|(%d*)|(%d*)|(%d*)|(%d*)|(%d*)|([^\n]*)()')
end

local function pack_record(token, deadline, flags, holder, count, seq, undone, granted, spill, label, list)
  return 'P1|' .. token .. '|' .. deadline .. '|' .. flags .. '|' .. holder .. '|' .. count .. '|' .. seq .. '|' ..
         undone .. '|' .. granted .. '|' .. spill .. '|' .. label .. list
end

local function now_ms()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000), t[1] * 1000000 + t[2]
end

-- The owner's tombstone: the highest operation id of owner that may no longer grant (0: none).
-- From the list, else from its own key while pushed-out tombstones may live (spill).
local function tombstone_of(key, list, owner, spill, now)
  local _, e = string.find(list, '\n' .. owner .. ' ', 1, true)
  if e then return tonumber(string.match(list, '^%d+', e + 1)) end
  if spill ~= '' and now < tonumber(spill) then
    return tonumber(redis.call('GET', key .. ':done:' .. owner)) or 0
  end
  return 0
end

-- The list with owner's entry set to op (first), and the entries pushed out past TOMBS
-- (a string of "\n<owner> <op>" entries, '' for none).
local function with_tombstone(list, owner, op)
  local s, e = string.find(list, '\n' .. owner .. ' ', 1, true)
  if s then
    local n = string.find(list, '\n', e + 1, true)
    list = string.sub(list, 1, s - 1) .. (n and string.sub(list, n) or '')
  end
  list = '\n' .. owner .. ' ' .. op .. list
  local at = 1
  for _ = 1, TOMBS do
    at = string.find(list, '\n', at + 1, true)
    if not at then return list, '' end
  end
  return string.sub(list, 1, at - 1), string.sub(list, at)
end

-- Tombstones pushed out of the list go to keys of their own for retention.
local function spill_out(key, out, retention)
  for owner, op in string.gmatch(out, '\n([^ ]+) (%d+)') do
    redis.call('SET', key .. ':done:' .. owner, op, 'PX', retention)
  end
end

local function fail_rare(what)
  return redis.error_reply('PROTO not in the prototype: ' .. what)
end
