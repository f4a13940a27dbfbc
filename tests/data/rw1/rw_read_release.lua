-- Read-write lock: release read holds.
-- KEYS[1] readers   KEYS[2] reader state hash   KEYS[3] fence hash   KEYS[4] release channel
-- KEYS[5] the owner's read tombstone   KEYS[6] writer hash
-- ARGV[1] owner   ARGV[2] lease ms   ARGV[3] operation id   ARGV[4] how many holds, or 'all'
-- ARGV[5] retention ms   ARGV[6] (optional) an operation id: release only if that operation was
--   the reader's last one (undoing a grant nobody will use); if it has not applied, the
--   tombstone is raised past it, so it never will (release.lua's undo)
-- Returns the holds left (0: released), -1 when the caller is not a reader, -2 for a late copy
-- of an older operation, -3 when ARGV[6] was not the last (release.lua's answers).
-- The last reader to leave publishes on the channel: a waiting writer goes.
local undoing = ARGV[6] and ARGV[6] ~= ''
local now = server_ms()
prune_readers(KEYS[1], KEYS[2], now)
local reader = ARGV[1]
if not redis.call('ZSCORE', KEYS[1], reader) then
  if redis.call('GET', KEYS[5]) == ARGV[3] then return 0 end
  if undoing then raise_tombstone(KEYS[5], ARGV[6], ARGV[5]) end
  return -1
end
local op = op_number(ARGV[3])
local seq = op_number(redis.call('HGET', KEYS[2], 's:' .. reader))
if op == seq then return tonumber(redis.call('HGET', KEYS[2], 'n:' .. reader)) end
if op < seq then return -2 end
if undoing and seq ~= op_number(ARGV[6]) then
  raise_tombstone(KEYS[5], ARGV[6], ARGV[5])
  return -3
end
local count = 0
if ARGV[4] ~= 'all' then
  count = redis.call('HINCRBY', KEYS[2], 'n:' .. reader, -tonumber(ARGV[4]))
end
if count > 0 then
  redis.call('HSET', KEYS[2], 's:' .. reader, ARGV[3])
  redis.call('ZADD', KEYS[1], 'XX', 'GT', now + tonumber(ARGV[2]), reader)
  extend_expiry(KEYS[1], ARGV[2])
  extend_expiry(KEYS[2], ARGV[2])
  keep_fence(KEYS[3], ARGV[2] + ARGV[5])
  return count
end
redis.call('ZREM', KEYS[1], reader)
redis.call('HDEL', KEYS[2], 'n:' .. reader, 's:' .. reader, 't:' .. reader)
raise_tombstone(KEYS[5], ARGV[3], ARGV[5])
if redis.call('ZCARD', KEYS[1]) == 0 then
  if redis.call('EXISTS', KEYS[6]) == 0 then keep_fence(KEYS[3], tonumber(ARGV[5])) end
  publish(KEYS[4], 'released')
end
return 0
