-- Read everything a name holds, of every kind, in one atomic step; changes nothing.
-- KEYS[1] lock hash   KEYS[2] fence hash   KEYS[3] readers   KEYS[4] reader state
-- KEYS[5] line places (waiter -> end of its place)   KEYS[6] waiting writers
-- KEYS[7] semaphore permits   KEYS[8] semaphore state   KEYS[9] semaphore waiters' places
-- (lock_keys.hpp, semaphore_keys.hpp: one hash tag, one slot.)
-- Returns what prelude.lua's name_contents says.
return name_contents()
