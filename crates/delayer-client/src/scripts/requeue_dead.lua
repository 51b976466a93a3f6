-- Gives dead jobs another chance: moves them from their topic's dead list back to the pool, due
-- now, with their attempts counted from zero again. Oldest first, at most ARGV[3] per call.
--
-- KEYS[1]  the topic's dead list ("delayer:dead_queue:<topic>")
-- KEYS[2]  the job pool ("delayer:job_pool")
-- ARGV[1]  now, in unix seconds
-- ARGV[2]  the job bucket key prefix ("delayer:job_bucket:")
-- ARGV[3]  the most jobs to move in this call
--
-- Returns {requeued, dropped}: how many went back to the pool, and how many ids were dropped
-- because their bucket had expired meanwhile. Fewer than ARGV[3] in all: the list is empty.

local dead, pool, now, bucket_prefix = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
require_type(pool, 'zset')
require_permission('ZADD', pool, '0', 'id')
require_permission('HDEL', bucket_prefix .. 'id', 'attempts')

local requeued, dropped = 0, 0
for _ = 1, tonumber(ARGV[3]) do
  local id = redis.call('RPOP', dead)
  if not id then
    break
  end
  local bucket = bucket_prefix .. id
  -- Checked as a type, not EXISTS: HDEL on a bucket of the wrong type would fail after the RPOP.
  if redis.call('TYPE', bucket).ok == 'hash' then
    redis.call('HDEL', bucket, 'attempts', 'died_at')
    redis.call('ZADD', pool, now, id)
    requeued = requeued + 1
  else
    dropped = dropped + 1
  end
end
return {requeued, dropped}
