-- A caller waits for a lock to be free without taking it (wait_until_free in admin.cpp): the
-- holder's release must publish, which it does only when the hash says someone waited ('w',
-- prelude.lua), as a busy answer would have marked it.
-- KEYS[1] lock hash
-- Returns 1 when it is held exclusively (marked), 0 otherwise (nothing written; also for a
-- hash of a later layout, which this script cannot know how to mark).
local state = read_lock(KEYS[1])
if not state.owner or layout_refusal(state) then return 0 end
mark_waited(KEYS[1], state)
return 1
