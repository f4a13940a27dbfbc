-- A caller waits for a name to be free without taking it (wait_until_free in admin.cpp). A
-- release publishes only when someone waited: an exclusive holder's when its hash says so
-- ('w', prelude.lua, as a busy answer would have marked it), the last reader's when a writer
-- waits or the reader state says so ('w', rw_read_release.lua), the last permit's 'free' when
-- the semaphore's state says so ('w': the server time, ms, until which someone waits;
-- semaphore_release.lua). This marks every hold that stands and looks at the name in the same
-- atomic step: a hold the look finds is marked (a hold that comes after it is found by the
-- caller's next look, which it makes when the release it waits for is heard, or when a lease
-- it found ends).
-- KEYS as inspect.lua: KEYS[1] lock hash ... KEYS[4] reader state ... KEYS[8] semaphore state
-- ARGV[1] how long the caller waits at most, ms: the semaphore's mark lasts that long (a
--   release that publishes 'free' takes it away)
-- Returns {marked, what inspect.lua returns}; marked, what it marked: 1 the exclusive hold, 2 the
-- readers' state, 4 the semaphore's state, summed. What it cannot mark, it leaves: a lock hash
-- of a later layout (whose marks this script cannot know; the caller then waits for its lease
-- to end at the most), and readers or permits whose state hash was lost (their last release
-- publishes then: rw_read_release.lua, semaphore_release.lua's general code).
local marked = 0
local state = read_lock(KEYS[1])
if state.owner and not layout_refusal(state) then
  mark_waited(KEYS[1], state)
  marked = 1
end
-- Readers' state lives as long as their leases: a mark on it goes with the last of them.
if redis.call('EXISTS', KEYS[4]) == 1 then
  redis.call('HSET', KEYS[4], 'w', '1')
  marked = marked + 2
end
local semaphore = redis.call('HMGET', KEYS[8], 'limit', 'used', 'w')
if semaphore[1] or semaphore[2] or semaphore[3] then
  local until_ms = server_ms() + tonumber(ARGV[1])
  if not semaphore[3] or tonumber(semaphore[3]) < until_ms then
    redis.call('HSET', KEYS[8], 'w', string.format('%.0f', until_ms))
  end
  marked = marked + 4
end
return {marked, name_contents()}
