-- Helpers of every kind's scripts, before the kind's prelude: each script carries
-- the ones it uses (cmake/GenerateScriptsHeader.cmake). How scripts tell clients.
--
-- On a Redis Cluster node, messages go by sharded pub/sub (SPUBLISH) on a
-- channel in the script's own slot: a plain PUBLISH would be broadcast to
-- every node over the cluster bus. On one server (or a Sentinel-managed
-- master), plain PUBLISH, which every client version listens to.
--
-- The script does not ask the server which it is: a client of a cluster
-- sends this script's cluster text, where the line below says true
-- (cmake/GenerateScriptsHeader.cmake writes both texts; Script::for_cluster).
-- So a script publishes the way its client subscribes, and a single server
-- is not asked CLUSTER MYID, whose error reply was the dearest call of a
-- publishing script and counted as an error in the server's INFO errorstats.
local sharded_pubsub = false

-- A notice is best effort (a client that misses one finds out at its next
-- renewal or attempt), so one the server refuses (an ACL user without
-- rights on the channel) must not fail the script after its writes.
local function publish(channel, message)
  if sharded_pubsub then
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
  if sharded_pubsub then return lock .. ':inbox:' .. client end
  return 'dlock:inbox:' .. client
end

