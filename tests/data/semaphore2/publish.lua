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

-- Where the client of `owner` (its id up to the first ':') hears what
-- happens to its holds and waits on the lock whose key is `lock`: one inbox
-- per client on one server; in a cluster one per client and lock name, in
-- the lock's slot (its key as the prefix).
local function inbox_of(owner, lock)
  local client = string.match(owner, '^[^:]*')
  if in_cluster() then return lock .. ':inbox:' .. client end
  return 'dlock:inbox:' .. client
end

