-- Release holds of a lock.
-- KEYS[1] lock hash   KEYS[2] fence hash   KEYS[3] release channel   KEYS[4] the owner's release tombstone
-- ARGV[1] owner   ARGV[2] lease ms   ARGV[3] operation id   ARGV[4] how many holds, or 'all'
-- ARGV[5] retention ms   ARGV[6] (optional) an operation id: release only if that operation
--   was the owner's last one (undoing a grant or re-entry nobody will use, and nothing else);
--   if it has not applied, the owner's tombstone is raised past it, so it never will
-- With a line (prelude.lua, "The line"): KEYS[5] line   KEYS[6] places   ARGV[7] grant ms:
--   a final release hands the lock straight to the first waiter in line (direct grant)
-- ARGV[8] (optional) the arrival number of the wait whose direct grant the caller holds
--   ('granted', prelude.lua): the grant wrote no operation id of its owner's, so a release
--   applies to it only when it names the grant
-- ARGV[9] (optional, with ARGV[6]) the waiter the undone hand-off placed in line behind its
--   next owner (hand_off.lua ARGV[7]), whose client never learnt it: that place goes too (named
--   by the arrival the hand-off noted, 'sa': not a later wait of the same waiter), so that the
--   lock is not granted to a place nobody listens for
-- Returns the holds left (0: released; waiters told, or the first in line granted), -1 when the caller does not hold
-- the lock, -2 for a late copy of an older operation, -3 when ARGV[6] was not the last.
-- A retry with the same operation id answers as the first copy did: the final release
-- leaves its operation id in the owner's own tombstone, which expires after retention.
-- The line is looked at, and the release published, only when the hash says someone was
-- answered busy while it was held ('w', prelude.lua). An operation undone while the owner
-- holds the lock is noted in the hash ('u') too, so that a re-entry need not read the
-- tombstone. Server calls (docs/design/server-work.md): a final release nobody waits for 4,
-- a release of a re-entry 4, a final release granting the first in line 15.
local undoing = ARGV[6] and ARGV[6] ~= ''
-- The common paths come first, with the few helpers they use (acquire.lua): a release of
-- the caller's own hold that nobody was answered busy for while it was held.
local h = redis.call('HMGET', KEYS[1], 'owner', 'count', 'seq', 'token', 'granted', 'w', 'u', 'v')
local op = op_number(ARGV[3])
-- The caller's own hold (a grant from the line only when the call names it: a late copy of
-- a release sent before the wait cannot), a new operation, and when undoing, the one undone
-- was its last; every other case answers below.
local releases = h[1] == ARGV[1] and (not h[5] or h[5] == ARGV[8]) and op > op_number(h[3]) and
                 (not undoing or op_number(h[3]) == op_number(ARGV[6]))
if releases then
  local count = 0
  if ARGV[4] ~= 'all' then count = (tonumber(h[2]) or 0) - tonumber(ARGV[4]) end
  if count > 0 then
    -- Its operation id from now on: a grant from the line is one like any other.
    if h[5] then redis.call('HDEL', KEYS[1], 'granted') end
    redis.call('HSET', KEYS[1], 'count', count, 'seq', ARGV[3])
    redis.call('PEXPIRE', KEYS[1], ARGV[2], 'GT')
    keep_fence(KEYS[2], ARGV[2] + ARGV[5])
    return count
  end
  local seat = undoing and ARGV[9] and ARGV[9] ~= '' and redis.call('HGET', KEYS[1], 'sa')
  if seat and KEYS[6] and redis.call('ZSCORE', KEYS[5], ARGV[9]) == seat then
    redis.call('ZREM', KEYS[5], ARGV[9])
    redis.call('ZREM', KEYS[6], ARGV[9])
  end
  redis.call('DEL', KEYS[1])
  tombstone_raised(KEYS[4], ARGV[3], ARGV[5])
  if not h[6] then
    keep_fence(KEYS[2], tonumber(ARGV[5]))
    return 0
  end
end
--@helpers
if not releases then
  local state = lock_state(h)
  -- An operation undone while the caller holds the lock: it never applies.
  local function undo_held()
    raise_tombstone(KEYS[4], ARGV[6], ARGV[5])
    if op_number(ARGV[6]) > state.undone then redis.call('HSET', KEYS[1], 'u', ARGV[6]) end
    return -3
  end
  if state.owner ~= ARGV[1] then
    if redis.call('GET', KEYS[4]) == ARGV[3] then return 0 end
    -- Undoing an operation that has not applied: a late copy of it never will.
    if undoing then raise_tombstone(KEYS[4], ARGV[6], ARGV[5]) end
    return -1
  end
  -- Granted to the caller from the line, and the call does not name the grant: a late copy
  -- of an older release (a grant its client gives up on leaves by line_leave.lua).
  if state.granted then
    if undoing then return undo_held() end
    return -2
  end
  if op == state.seq then return state.count end
  if op < state.seq then return -2 end
  return undo_held()  -- undoing, and the operation undone was not the last
end
-- A final release that someone was answered busy for: the first in line gets the lock, or
-- the waiters are told.
-- (The fence's expiry is set once: for the grant, or to the retention.)
if KEYS[6] and grant_first_in_line(KEYS[1], KEYS[2], KEYS[5], KEYS[6], tonumber(ARGV[7]), tonumber(ARGV[5]), nil, true) then
  return 0
end
keep_fence(KEYS[2], tonumber(ARGV[5]))
publish(KEYS[3], 'released')
return 0
