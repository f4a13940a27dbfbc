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

-- The server's clock in microseconds, and in milliseconds. Every deadline a script stores (a
-- reader's lease, a waiting writer's mark, a waiter's place) is server time: no client's clock
-- decides anything here. A script that needs both reads TIME once (server_us) and derives the
-- milliseconds (ms_of); server_ms reads it on its own, so that a common path that needs only
-- milliseconds (acquire.lua, --@helpers) defines one helper for it, not two.
local function server_us()
  local now = redis.call('TIME')
  return tonumber(now[1]) * 1000000 + tonumber(now[2])
end

local function ms_of(us)
  return math.floor(us / 1000)
end

local function server_ms()
  local now = redis.call('TIME')
  return tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
end

-- A new fencing token, and its text: past the last one issued for this name and, with
-- floor_always (or when the counter is gone), at least the server's clock
-- in microseconds. Tokens therefore keep increasing after the counter is
-- lost (retention expiry, eviction, a restart without persistence, a
-- failover to a replica that lagged), as long as the server's clock does
-- not step back.
-- now_us: the server's clock (server_us), when the caller has read it already.
local function next_token(fence, floor_always, now_us)
  local last = tonumber(redis.call('HGET', fence, 'token'))
  local token = last and last + 1 or 0
  if floor_always or not last then
    now_us = now_us or server_us()
    if now_us > token then token = now_us end
  end
  local text = string.format('%.0f', token)  -- (tostring would write a token above 1e14 as 1.7e+15)
  redis.call('HSET', fence, 'token', text)
  return token, text
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

-- raise_tombstone's, in one call where it rises (the common case: a final
-- release, a busy answer): false, with the tombstone as it was (its expiry
-- renewed), when op was not above it, so that operation may no longer grant.
local function tombstone_raised(tombstone, op, ms)
  local old = redis.call('SET', tombstone, op, 'PX', ms, 'GET')
  if op_number(op) > op_number(old) then return true end
  redis.call('SET', tombstone, old, 'PX', ms)
  return false
end

-- The data layout of a name's keys, kept in the lock hash as 'v'. Layout 1
-- (dlock before 'v' existed) wrote no 'v'; layout 2 reads and writes layout
-- 1's keys as they are (the same hash, fence, tombstones and line) and adds
-- to the hash 'w' (someone was answered busy while it was held: only then
-- does the release look at the line and publish), 'u' (the highest operation
-- of the owner undone while it held the lock) and 'v'. A lock hash of a
-- later layout is refused before any write (errc::layout_mismatch): this
-- script cannot know what that layout's holder expects.
local layout = 2

-- The exclusive hold of a lock hash {owner, count, seq, token, holder, granted, w, u, v},
-- as acquire.lua and rw_write_acquire.lua keep it, from its fields as read_lock reads them
-- (scripts whose common paths read them first pass them here).
local function lock_state(h)
  return {owner = h[1], count = tonumber(h[2]) or 0, seq = op_number(h[3]), token = tonumber(h[4]),
          granted = h[5], waited = h[6], undone = op_number(h[7]), layout = h[8] or '1',
          present = h[1] or h[2] or h[3] or h[4] or h[5] or h[6] or h[7] or h[8]}
end

-- lock_state of a lock hash, in one read.
local function read_lock(lock)
  return lock_state(redis.call('HMGET', lock, 'owner', 'count', 'seq', 'token', 'granted', 'w', 'u', 'v'))
end

local function layout_refusal(state)
  local found = tonumber(state.layout)
  if found and found <= layout then return nil end
  return redis.error_reply('DLOCK_LAYOUT the lock is held in data layout ' .. state.layout ..
                           '; this client reads layouts 1 to ' .. layout .. ' and writes layout ' .. layout ..
                           ': upgrade this client, or use another name')
end

-- Someone was answered busy: the release looks at the line and publishes.
local function mark_waited(lock, state)
  if not state.waited then redis.call('HSET', lock, 'w', '1') end
end

-- The answer to operation op of owner when it is a resent copy ({1, token,
-- count}, as the first copy answered) or a late copy of an operation that may
-- no longer grant ({-2}); nil for a new operation. A re-entry of the holder
-- is checked against the operations undone while it held the lock ('u'):
-- any other of the owner's tombstone raises happened while it did not hold
-- it, so the hold's own operation id (seq) is past them.
local function replayed_acquire(state, tombstone, owner, op, reenter)
  if state.owner == owner then
    if op == state.seq then return {1, state.token, state.count} end
    if op < state.seq then return {-2} end
    if reenter then
      if op <= state.undone then return {-2} end
      return nil
    end
  end
  -- An operation its client gave up on (answered busy, or undone after its
  -- outcome stayed unknown) never applies, however late a copy arrives.
  if op <= op_number(redis.call('GET', tombstone)) then return {-2} end
  return nil
end

-- One more hold of the owner: never more than one lease from now, however deep.
local function reenter_exclusive(lock, fence, count, token, op_id, lease, retention)
  count = count + 1
  redis.call('HSET', lock, 'count', count, 'seq', op_id)
  redis.call('PEXPIRE', lock, lease, 'GT')
  keep_fence(fence, lease + retention)
  return {1, token, count}
end

-- A fresh exclusive hold of a name with no lock hash: count 1, a new token; label says who
-- holds it, for operators; waited: others stand in line (the release looks at the line).
-- The hash is written in one call.
local function write_grant(lock, fence, owner, op_id, lease, retention, floor_always, label, waited)
  local token, text = next_token(fence, floor_always)
  -- Written out, not built in a table for unpack: this is a fresh grant's hottest line.
  if label and label ~= '' then
    if waited then
      redis.call('HSET', lock, 'owner', owner, 'count', 1, 'seq', op_id, 'token', text, 'v', layout, 'holder', label, 'w', '1')
    else
      redis.call('HSET', lock, 'owner', owner, 'count', 1, 'seq', op_id, 'token', text, 'v', layout, 'holder', label)
    end
  elseif waited then
    redis.call('HSET', lock, 'owner', owner, 'count', 1, 'seq', op_id, 'token', text, 'v', layout, 'w', '1')
  else
    redis.call('HSET', lock, 'owner', owner, 'count', 1, 'seq', op_id, 'token', text, 'v', layout)
  end
  redis.call('PEXPIRE', lock, lease)
  keep_fence(fence, lease + retention)
  return {1, token, 1}
end

-- write_grant, replacing an earlier hold's hash if there is one.
local function grant_exclusive(lock, fence, state, owner, op_id, lease, retention, floor_always, label, waited)
  if state.present then redis.call('DEL', lock) end
  return write_grant(lock, fence, owner, op_id, lease, retention, floor_always, label, waited)
end

-- Pushes a key's expiry out to at least ms from now, never shortening it.
-- (PEXPIRE GT would leave a key without expiry as it is: it counts as infinite.)
local function extend_expiry(key, ms)
  local left = redis.call('PTTL', key)
  if left == -1 or (left >= 0 and left < tonumber(ms)) then
    redis.call('PEXPIRE', key, ms)
  end
end

-- extend_expiry's, in one call where the expiry grows (a reader's keys, whose life follows the
-- latest lease given): PEXPIRE GT, and only when that changed nothing, a look whether the key
-- has no expiry at all (which GT leaves as it is). A write Redis lets through when out of memory.
-- The reader set and the reader state hash get an expiry in the call that creates them, so
-- where a script knows one existed before it (a live reader's member or state was read), a
-- plain 'PEXPIRE key ms GT' does the same in one call.
local function lengthen_expiry(key, ms)
  if redis.call('PEXPIRE', key, ms, 'GT') == 0 and redis.call('PTTL', key) == -1 then
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

-- Whether member's deadline in a sorted set is still ahead (server time).
local function live_member(set, member, now)
  local deadline = redis.call('ZSCORE', set, member)
  return deadline and tonumber(deadline) > now
end

-- How many members of a sorted set have a deadline still ahead.
local function live_count(set, now)
  return redis.call('ZCOUNT', set, '(' .. now, '+inf')
end

-- One name is one resource, held one way at a time: exclusively (a Lock, FairLock, Redlock,
-- MultiLock member or an RwLock's write side: one lock hash, so they exclude each other), shared
-- by an RwLock's readers (whom a writer waits for), or as a Semaphore's permits. A kind that
-- cannot take part (a Lock does not wait for readers; nothing of a lock waits for permits) is
-- refused with an error reply, "DLOCK_KIND ..." (errc::kind_mismatch), before any write.
local function kind_error(what)
  return redis.error_reply('DLOCK_KIND the name is held as ' .. what .. '; take it as one, or use another name')
end

-- Whether the name is live as another kind than the caller's: `readers` (nil for an RwLock,
-- whose own key it is), a semaphore's permits and its waiters' places (lock_keys.hpp).
-- Called only where the caller's own key is absent (a free name), so re-entries, renewals and
-- busy answers pay nothing and a fresh grant one EXISTS; the closer look runs only when another
-- kind's key exists, since those keys end by expiry some time after their last member did.
-- Returns kind_error's reply, or nil.
local function other_kind(readers, permits, waiters)
  local found
  if readers then found = redis.call('EXISTS', readers, permits, waiters)
  else found = redis.call('EXISTS', permits, waiters) end
  if found == 0 then return nil end
  local now = server_ms()
  if readers and live_count(readers, now) > 0 then
    return kind_error('a read-write lock (readers hold it; its write side waits for them)')
  end
  if live_count(permits, now) + live_count(waiters, now) > 0 then return kind_error('a semaphore') end
  return nil
end

-- The earliest deadline still ahead in a sorted set, other than `except`'s,
-- as ms from now (at least 1), or nil when there is none.
local function first_deadline_in(set, now, except)
  local first = redis.call('ZRANGE', set, '(' .. now, '+inf', 'BYSCORE', 'LIMIT', 0, 2, 'WITHSCORES')
  for i = 1, #first, 2 do
    if first[i] ~= except then
      return math.max(tonumber(first[i + 1]) - now, 1)
    end
  end
  return nil
end

-- The line (queued waiting, Lock and FairLock): waiters in arrival order on
-- the server, and direct grant. Two sorted sets under the lock's hash tag:
-- the line (waiter -> arrival number) and the waiters' places (waiter -> the
-- server time, ms, its place ends unless its client refreshes it). A waiter
-- is an owner id: one owner waits for one lock at a time.
-- Scripts that may grant take them as optional KEYS: without them (Redlock)
-- there is no line and nothing here runs.

-- Waiters whose client stopped refreshing leave the line. In slices: Lua
-- unpacks at most a few thousand values into one call, and a crowd of
-- waiters cut off together may have left more.
local function prune_line(line, places, now)
  local gone = redis.call('ZRANGEBYSCORE', places, '-inf', now)
  if #gone == 0 then return end
  for first = 1, #gone, 1000 do
    redis.call('ZREM', line, unpack(gone, first, math.min(first + 999, #gone)))
  end
  redis.call('ZREMRANGEBYSCORE', places, '-inf', now)
end

local function first_in_line(line)
  return redis.call('ZRANGE', line, 0, 0)[1]
end

-- Keeps waiter's place for place_ms more; a new waiter goes to the end.
-- A waiter's score in the line is its arrival number, which also names its
-- wait: it never repeats for one lock, also after the line emptied (its key
-- is then gone) or the fence expired, because each new one is at least the
-- server's clock in microseconds (now_us, server_us) and above the last one
-- given (kept in the fence hash, whose expiry the line's keeps up with). A new
-- wait (new_wait) always gets a new arrival, at the end of the line, even if
-- its owner still stands there from a wait it gave up whose line_leave has not
-- come yet: that line_leave, or that wait's grant notice, can then never be
-- taken for the new wait's. Returns the arrival.
-- The line's and the places' expiries grow with each place taken: lengthen_expiry, one call
-- each while a crowd waits (each new place ends after the ones before it); extend_expiry, two,
-- where the keys are new (three with lengthen_expiry): line_may_be_new, the first busy answer
-- of a hold. Either never shortens an expiry and always leaves one.
local function take_place(line, places, fence, waiter, now_us, place_ms, new_wait, line_may_be_new)
  local arrival = not new_wait and tonumber(redis.call('ZSCORE', line, waiter))
  if not arrival then
    arrival = math.max((tonumber(redis.call('HGET', fence, 'arrival')) or 0) + 1, now_us)
    redis.call('HSET', fence, 'arrival', string.format('%.0f', arrival))
    redis.call('ZADD', line, string.format('%.0f', arrival), waiter)
    extend_expiry(fence, place_ms)
  end
  redis.call('ZADD', places, ms_of(now_us) + place_ms, waiter)
  local keep_expiry = line_may_be_new and extend_expiry or lengthen_expiry
  keep_expiry(line, place_ms)
  keep_expiry(places, place_ms)
  return arrival
end

local function leave_line(line, places, waiter)
  redis.call('ZREM', line, waiter)
  redis.call('ZREM', places, waiter)
end

-- Direct grant: the free lock goes to the first waiter in line, who is told
-- on its client's inbox ('granted <owner> <token> <arrival> <lock key>': the
-- arrival names the wait the grant is for). The grant is marked unconfirmed
-- ('granted' = that arrival) and leased for grant_ms, or for what was left
-- of the waiter's place if that is longer, so never less than the place the
-- waiter's client last kept: that client may take the lock as held from
-- the notice alone, valid until its last confirmed place-keeping request's
-- send time + its waiter_lease. Its renewals give it the full lease; its
-- releases, hand-offs and re-entries name the grant by its arrival, which
-- no late copy of an older one can (release.lua), and the first of them
-- that writes to the hash clears the mark. A fixed lease is confirmed at once
-- (confirm_grant.lua), and a waiter that missed its notice confirms the
-- grant with its next acquisition. A waiter that died meanwhile blocks the
-- lock that long at most. Returns the new owner, or nil when nobody is in line.
-- now_us (server_us) is read here when not given; lock_gone: the caller deleted the lock hash.
-- A lock nobody waits for (no line key) costs one ZRANGE, nothing more; the line is pruned
-- (prune_line) only when its first waiter's place has ended.
local function grant_first_in_line(lock, fence, line, places, grant_ms, retention, now_us, lock_gone)
  local first = redis.call('ZRANGE', line, 0, 0, 'WITHSCORES')
  if not first[1] then return nil end
  now_us = now_us or server_us()
  local now = ms_of(now_us)
  local place_end = tonumber(redis.call('ZSCORE', places, first[1]))
  if not place_end or place_end <= now then
    prune_line(line, places, now)
    first = redis.call('ZRANGE', line, 0, 0, 'WITHSCORES')
    if not first[1] then return nil end
    place_end = tonumber(redis.call('ZSCORE', places, first[1]))
  end
  local waiter, arrival = first[1], first[2]
  local place_left = (place_end or now) - now
  if place_left > grant_ms then grant_ms = place_left end
  leave_line(line, places, waiter)
  local token = next_token(fence, true, now_us)
  if not lock_gone then redis.call('DEL', lock) end
  redis.call('HSET', lock, 'owner', waiter, 'count', 1, 'seq', '0', 'token', string.format('%.0f', token),
             'granted', arrival, 'w', '1', 'v', layout)
  redis.call('PEXPIRE', lock, grant_ms)
  keep_fence(fence, grant_ms + retention)
  publish(inbox_of(waiter, lock),
             'granted ' .. waiter .. ' ' .. string.format('%.0f', token) .. ' ' .. arrival .. ' ' .. lock)
  return waiter
end

-- The waiter a lock was granted to asks for it, naming its wait (it missed the notice): the
-- full lease from now (never less than the grant's own) and its label. The grant stays named
-- by its arrival and writes no operation id of this call's: the waiter's client names the
-- arrival in its calls on the hold (release.lua), and a late copy of the undo of one of the
-- wait's attempts (release.lua ARGV[6], which names no arrival) can then never free it.
-- A resent copy of this call answers the same.
local function confirm_grant(lock, fence, state, lease, retention, label)
  if label and label ~= '' then redis.call('HSET', lock, 'holder', label) end
  redis.call('PEXPIRE', lock, lease, 'GT')
  keep_fence(fence, lease + retention)
  return {1, state.token, 1}
end

-- Everything a name holds, of every kind, read in one step (inspect.lua's answer; KEYS as
-- there): {owner or false, count, pttl, holder's token, last token issued, holder's label or
-- false, {reader, count, lease left ms, token, ...}, waiters in the line, waiting writers,
-- semaphore limit (0: none), {permit id, lease left ms, ...}, semaphore waiters}. Expired
-- readers, permits and places are left out.
local function name_contents()
  local now = server_ms()
  local last = tonumber(redis.call('HGET', KEYS[2], 'token')) or 0
  local readers = {}
  local live = redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. now, '+inf', 'WITHSCORES')
  for i = 1, #live, 2 do
    local r = live[i]
    local state = redis.call('HMGET', KEYS[4], 'n:' .. r, 't:' .. r)
    readers[#readers + 1] = r
    readers[#readers + 1] = tonumber(state[1]) or 1
    readers[#readers + 1] = tonumber(live[i + 1]) - now
    readers[#readers + 1] = tonumber(state[2]) or 0
  end
  local permits = {}
  live = redis.call('ZRANGEBYSCORE', KEYS[7], '(' .. now, '+inf', 'WITHSCORES')
  for i = 1, #live, 2 do
    permits[#permits + 1] = live[i]
    permits[#permits + 1] = tonumber(live[i + 1]) - now
  end
  local limit = tonumber(redis.call('HGET', KEYS[8], 'limit')) or 0
  local tail = {readers, live_count(KEYS[5], now), live_count(KEYS[6], now), limit, permits, live_count(KEYS[9], now)}
  local owner = redis.call('HGET', KEYS[1], 'owner')
  if not owner then
    return {false, 0, -2, 0, last, false, unpack(tail)}
  end
  return {owner, tonumber(redis.call('HGET', KEYS[1], 'count')), redis.call('PTTL', KEYS[1]),
          tonumber(redis.call('HGET', KEYS[1], 'token')), last, redis.call('HGET', KEYS[1], 'holder'), unpack(tail)}
end
