-- Gives dead jobs another chance: moves them from their topic's dead list back to the pool, due
-- now, with their attempts counted from zero again. Oldest first, at most ARGV[3] per call.
--
-- KEYS[1]  the topic's dead list ("delayer:dead_queue:<topic>")
-- KEYS[2]  the job pool ("delayer:job_pool")
-- KEYS[3]  the reservations ("delayer:reserved")
-- ARGV[1]  the caller's clock, unix seconds: now, only when this Redis user may not run TIME
-- ARGV[2]  the job bucket key prefix ("delayer:job_bucket:")
-- ARGV[3]  the most jobs to move in this call
--
-- Returns {requeued, dropped}: how many went back to the pool, and how many ids were dropped
-- because their bucket had expired meanwhile or they are dead no more (pushed again since). Fewer than ARGV[3] in all: the list is empty.

local dead, pool, reserved, bucket_prefix = KEYS[1], KEYS[2], KEYS[3], ARGV[2]
require_type(pool, 'zset')
require_permission('ZADD', pool, '0', 'id')
require_permission('HDEL', bucket_prefix .. 'id', 'attempts')
require_permission('HSET', bucket_prefix .. 'id', 'recounted', '1')
local now = decimal(clock(ARGV[1]))

local requeued, dropped = 0, 0
for _ = 1, tonumber(ARGV[3]) do
  local id = redis.call('RPOP', dead)
  if not id then
    break
  end
  local bucket = bucket_prefix .. id
  -- Only a job that is dead still: one pushed again since (waiting in the pool, reserved, its
  -- death forgotten) must keep its own due time. Checked as a type first: HDEL on a bucket of the
  -- wrong type would fail after the RPOP.
  local dead_still = redis.call('TYPE', bucket).ok == 'hash'
    and redis.call('HEXISTS', bucket, 'died_at') == 1
    and not redis.call('ZSCORE', pool, id)
    and not redis.call('ZSCORE', reserved, id)
  if dead_still then
    -- Its attempts are counted afresh: an attempt alone no longer names one reservation.
    redis.call('HDEL', bucket, 'attempts', 'died_at', 'died_why', 'ended')
    redis.call('HSET', bucket, 'recounted', '1')
    redis.call('ZADD', pool, now, id)
    requeued = requeued + 1
  else
    dropped = dropped + 1
  end
end
return {requeued, dropped}
