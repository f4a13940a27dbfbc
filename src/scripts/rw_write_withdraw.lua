-- Read-write lock: a writer that stops waiting (deadline, stop, failure) takes back its
-- waiting mark, so that the readers queued behind it go at once, not when the mark runs out.
-- KEYS[1] waiting writers   KEYS[2] the owner's write tombstone   KEYS[3] release channel
-- ARGV[1] owner   ARGV[2] the operation id of its last attempt   ARGV[3] retention ms
-- The tombstone is raised past that attempt first: a late copy of it can neither grant
-- nor mark again.
-- Returns 1 when a mark was taken back, 0 when there was none.
raise_tombstone(KEYS[2], ARGV[2], ARGV[3])
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return 0 end
-- Marks of writers that died waiting have run out: they hold nobody back.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', server_ms())
if redis.call('ZCARD', KEYS[1]) == 0 then
  publish(KEYS[3], 'released')
end
return 1
