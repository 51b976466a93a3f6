-- One dead job, by id: takes it off its topic's dead list and either puts it back in the pool, due
-- now, its attempts counted afresh ('requeue'), or deletes its data ('delete'). In one script, so
-- that the job is never both dead and waiting (delivered twice) nor neither (lost).
--
-- KEYS[1]  the topic's dead list ("delayer:dead_queue:<topic>")
-- KEYS[2]  the job pool ("delayer:job_pool")
-- KEYS[3]  the reservations ("delayer:reserved")
-- ARGV[1]  the caller's clock, unix seconds: now, only when this Redis user may not run TIME
-- ARGV[2]  the job bucket key prefix ("delayer:job_bucket:")
-- ARGV[3]  the job's id
-- ARGV[4]  'requeue' or 'delete'
--
-- Returns 0 when the id is not on the dead list (nothing changed); 1 when the job was requeued or
-- deleted; 2 when the id was on the list but its job is dead no more (pushed again since, or its
-- data expired): the stale entry is taken off the list and nothing else changes.

local dead, pool, reserved = KEYS[1], KEYS[2], KEYS[3]
local bucket, id, action = ARGV[2] .. ARGV[3], ARGV[3], ARGV[4]
require_type(dead, 'list')
require_type(pool, 'zset')
require_permission('LREM', dead, '1', id)
if action == 'requeue' then
  require_permission('ZADD', pool, '0', id)
  require_permission('HDEL', bucket, 'attempts')
  require_permission('HSET', bucket, 'recounted', '1')
else
  require_permission('DEL', bucket)
end
local now = decimal(clock(ARGV[1]))

-- Checked before any write, as a type first: HDEL on a bucket of the wrong type would fail after
-- the LREM.
local dead_still = redis.call('TYPE', bucket).ok == 'hash'
  and redis.call('HEXISTS', bucket, 'died_at') == 1
  and not redis.call('ZSCORE', pool, id)
  and not redis.call('ZSCORE', reserved, id)
if redis.call('LREM', dead, 1, id) == 0 then
  return 0
end
if not dead_still then
  return 2
end
if action == 'requeue' then
  -- Its attempts are counted afresh: an attempt alone no longer names one reservation.
  redis.call('HDEL', bucket, 'attempts', 'died_at', 'died_why', 'ended')
  redis.call('HSET', bucket, 'recounted', '1')
  redis.call('ZADD', pool, now, id)
else
  redis.call('DEL', bucket)
end
return 1
