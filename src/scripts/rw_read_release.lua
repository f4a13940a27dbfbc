-- Read-write lock: release read holds.
-- KEYS[1] readers   KEYS[2] reader state hash   KEYS[3] fence hash   KEYS[4] release channel
-- KEYS[5] the owner's read tombstone   KEYS[6] writer hash   KEYS[7] waiting writers
-- ARGV[1] owner   ARGV[2] lease ms   ARGV[3] operation id   ARGV[4] how many holds, or 'all'
-- ARGV[5] retention ms   ARGV[6] (optional) an operation id: release only if that operation was
--   the reader's last one (undoing a grant nobody will use); if it has not applied, the
--   tombstone is raised past it, so it never will (release.lua's undo)
-- Returns the holds left (0: released), -1 when the caller is not a reader, -2 for a late copy
-- of an older operation, -3 when ARGV[6] was not the last (release.lua's answers).
-- The last reader to leave takes the reader set and the state hash with it (the state of
-- readers whose lease ended too), and publishes on the channel when someone waits for the
-- readers: a writer marked waiting (its mark comes before it listens, rw_write_acquire.lua),
-- or a caller that marked the state hash 'w' (wait_until_free, mark_waited.lua); a writer
-- hash that stands (a writer that also reads) publishes too, rarely and harmlessly.
-- Server calls (docs/design/server-work.md): the last reader's release nobody waits for 8, a
-- reader's leaving others 7, a release of a re-entry 8 (were 14, 10, 10-12).
local undoing = ARGV[6] and ARGV[6] ~= ''
local reader = ARGV[1]
local op = op_number(ARGV[3])
local held = redis.call('HMGET', KEYS[2], 's:' .. reader, 'n:' .. reader, 'w')
local seq = op_number(held[1])
local now = server_ms()
local deadline = tonumber(redis.call('ZSCORE', KEYS[1], reader))
local live = deadline and deadline > now
-- The common paths first, with the few helpers they use (acquire.lua): a live reader's new
-- operation (when undoing, the one undone was its last); every other case answers below.
local releases = live and op > seq and (not undoing or seq == op_number(ARGV[6]))
if releases then
  local count = 0
  if ARGV[4] ~= 'all' then count = (tonumber(held[2]) or 0) - tonumber(ARGV[4]) end
  if count > 0 then
    redis.call('HSET', KEYS[2], 'n:' .. reader, count, 's:' .. reader, ARGV[3])
    redis.call('ZADD', KEYS[1], 'XX', 'GT', now + tonumber(ARGV[2]), reader)
    -- Both keys existed (prelude.lua, lengthen_expiry).
    redis.call('PEXPIRE', KEYS[1], ARGV[2], 'GT')
    redis.call('PEXPIRE', KEYS[2], ARGV[2], 'GT')
    keep_fence(KEYS[3], ARGV[2] + ARGV[5])
    return count
  end
  -- The caller is live, so it is the last when nobody else is.
  local last = redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf') <= 1
  if last then
    redis.call('DEL', KEYS[1], KEYS[2])
  else
    redis.call('ZREM', KEYS[1], reader)
    redis.call('HDEL', KEYS[2], 'n:' .. reader, 's:' .. reader, 't:' .. reader)
  end
  tombstone_raised(KEYS[5], ARGV[3], ARGV[5])
  if not last then return 0 end
  -- The writer's hash counted twice, the waiting writers once.
  local others = redis.call('EXISTS', KEYS[6], KEYS[6], KEYS[7])
  if others < 2 then keep_fence(KEYS[3], tonumber(ARGV[5])) end
  -- A reader whose state was lost (evicted) may have been waited for unmarked (mark_waited.lua
  -- cannot mark a state that is gone): its release publishes.
  if others == 0 and not held[3] and held[1] then return 0 end
end
--@helpers
if not releases then
  if not live then
    if redis.call('GET', KEYS[5]) == ARGV[3] then return 0 end
    if undoing then raise_tombstone(KEYS[5], ARGV[6], ARGV[5]) end
    return -1
  end
  if op == seq then return tonumber(held[2]) end
  if op < seq then return -2 end
  -- Undoing, and the operation undone was not the reader's last.
  raise_tombstone(KEYS[5], ARGV[6], ARGV[5])
  return -3
end
-- The last reader left, and someone waits for that.
publish(KEYS[4], 'released')
return 0
