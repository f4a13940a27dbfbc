-- A caller waits for a lock to be free without taking it (wait_until_free in admin.cpp): the
-- holder's release must publish, which it does only when the hash says someone waited ('w',
-- prelude.lua), as a busy answer would have marked it; and the last reader's release only when
-- a writer waits or the reader state hash says someone does ('w', rw_read_release.lua).
-- KEYS[1] lock hash   KEYS[2] (optional) reader state hash
-- Returns what it marked: 1 the exclusive hold, 2 the readers' state, 3 both (a writer that also
-- reads), 0 nothing (nothing written; also for a lock hash of a later layout, which this script
-- cannot know how to mark). Each mark covers only its own kind of hold: a reader that comes in
-- after a mark of the exclusive hold (its lease ended meanwhile) is not marked by it.
local marked = 0
local state = read_lock(KEYS[1])
if state.owner then
  if layout_refusal(state) then return 0 end
  mark_waited(KEYS[1], state)
  marked = 1
end
-- Readers' state lives as long as their leases: a mark on it goes with the last of them.
if KEYS[2] and redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('HSET', KEYS[2], 'w', '1')
  marked = marked + 2
end
return marked
