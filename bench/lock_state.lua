-- Gives the server the state dlock's lock+unlock meets on names it has used
-- before, ahead of compare.py's redis-benchmark runs of the acquire and
-- release scripts: for the names redis-benchmark makes of
-- dlock:{__rand_int__} numbered ARGV[1]..ARGV[2], each name's fence (the
-- last token), and with ARGV[3] = 'held' the lock itself, held by 'owner'
-- at operation 1 with one hold, so that the first release of each name is a
-- final one (DEL, tombstone, PUBLISH). Expiries are long: nothing expires
-- during the run.
for i = tonumber(ARGV[1]), tonumber(ARGV[2]) do
  local name = string.format('dlock:{%012d}', i)
  redis.call('HSET', name .. ':fence', 'token', 1000)
  redis.call('PEXPIRE', name .. ':fence', 600000)
  if ARGV[3] == 'held' then
    redis.call('HSET', name, 'owner', 'owner', 'count', 1, 'seq', 1, 'token', 1000)
    redis.call('PEXPIRE', name, 600000)
  end
end
return 1
