-- The floor's capacity run (bench/compare.py, floor_capacity): the names
-- redis-benchmark makes of floor:{__rand_int__} (twelve digits) numbered
-- ARGV[1]..ARGV[2], held with token "t" for 30 s, so that nearly every
-- unlock it sends finds its lock and deletes it.
for i = tonumber(ARGV[1]), tonumber(ARGV[2]) do
  redis.call('SET', string.format('floor:{%012d}', i), 't', 'PX', 30000)
end
return 1
