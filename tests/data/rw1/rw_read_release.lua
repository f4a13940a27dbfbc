-- Helpers of every kind's scripts, before the kind's prelude: each script carries
-- the ones it uses (cmake/GenerateScriptsHeader.cmake). How scripts tell clients.
--
-- On a Redis Cluster node, messages go by sharded pub/sub (SPUBLISH) on a
-- channel in the script's own slot: a plain PUBLISH would be broadcast to
-- every node over the cluster bus. On one server (or a Sentinel-managed
-- master), plain PUBLISH, which every client version listens to. The
-- client subscribes the same way (its subscriber knows which it talks to).
local cluster_mode = nil
local function in_cluster()
  if cluster_mode == nil then
    cluster_mode = type(redis.pcall('CLUSTER', 'MYID')) == 'string'
  end
  return cluster_mode
end

-- A notice is best effort (a client that misses one finds out at its next
-- renewal or attempt), so one the server refuses (an ACL user without
-- rights on the channel) must not fail the script after its writes.
local function publish(channel, message)
  if in_cluster() then
    redis.pcall('SPUBLISH', channel, message)
  else
    redis.pcall('PUBLISH', channel, message)
  end
end

-- The lock scripts' helpers: each script carries in front of it those it uses, directly or
-- through another helper, and no others (cmake/GenerateScriptsHeader.cmake): a helper is defined
-- anew on every call.
--
-- Operation ids: every owner numbers its operations in increasing order
-- (one counter per client), so a late copy of an old operation (one that
-- sat in the buffer of a paused server, or of a connection the client gave
-- up on) can be told from a new one and ignored.
local function op_number(op)
  return tonumber(op) or 0
end

-- The fence outlives the lock by the retention period: while the lock may
-- be held its expiry is pushed past the lease, and once the lock is free
-- nothing of it stays longer than retention.
local function keep_fence(fence, ms)
  redis.call('PEXPIRE', fence, ms)  -- ms is below 1e14, which a number argument writes in full
end

-- The owner's tombstone keeps the highest operation id that may no longer
-- grant: a final release's, and a fresh acquisition's that was answered
-- busy (a late copy of it, arriving once the lock is free, must not grant
-- a hold its client gave up on). It never goes down, and expires after
-- the retention period.
local function raise_tombstone(tombstone, op, ms)
  if op_number(op) > op_number(redis.call('GET', tombstone)) then
    redis.call('SET', tombstone, op, 'PX', ms)
  end
end

-- The server's clock in milliseconds. Every deadline a script stores (a
-- reader's lease, a waiting writer's mark) is server time: no client's clock
-- decides anything here.
local function server_ms()
  local now = redis.call('TIME')
  return tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
end

-- Pushes a key's expiry out to at least ms from now, never shortening it.
-- (PEXPIRE GT would leave a key without expiry as it is: it counts as infinite.)
local function extend_expiry(key, ms)
  local left = redis.call('PTTL', key)
  if left == -1 or (left >= 0 and left < tonumber(ms)) then
    redis.call('PEXPIRE', key, ms)
  end
end

-- Read-write lock: readers whose lease has ended (server time) leave the
-- reader set, and their count, last operation and token leave the reader
-- state hash. A crashed reader frees its share within one lease.
-- Acquisitions decide by live_* below and prune after their grant: a write
-- that frees memory first would let the grant through when Redis is out of
-- memory (a script's first write decides whether it may write at all).
local function prune_readers(readers, state, now)
  local gone = redis.call('ZRANGEBYSCORE', readers, '-inf', now)
  for _, reader in ipairs(gone) do
    redis.call('HDEL', state, 'n:' .. reader, 's:' .. reader, 't:' .. reader)
  end
  if #gone > 0 then
    redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)
  end
end

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
