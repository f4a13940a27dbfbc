-- A caller waits for the semaphore to be free without taking it (wait_until_free in
-- admin.cpp): the release of its last permit must publish 'free', which a release on its
-- common path does only while the state hash says someone waits ('w': the server time, ms,
-- until which someone does; semaphore_release.lua). A release that publishes 'free' takes
-- the mark away; the caller marks again before each look at the semaphore.
-- KEYS as in the prelude.   ARGV[1] how long the caller waits at most, ms
-- Returns 1 when marked, 0 when the semaphore has no state hash: nothing was granted within
-- its retention, or the state was lost, and a release with no state takes the general path,
-- which always publishes 'free' (as mark_waited.lua leaves a free lock alone).
local marked = redis.call('HMGET', KEYS[2], 'limit', 'used', 'w')
if not (marked[1] or marked[2] or marked[3]) then return 0 end
local until_ms = now_ms() + tonumber(ARGV[1])
if not marked[3] or tonumber(marked[3]) < until_ms then
  redis.call('HSET', KEYS[2], 'w', string.format('%.0f', until_ms))
end
return 1
