-- Finishes a job: ends its reservation and deletes it, so that it is never delivered again. Only
-- the reservation named (by id and attempt) is finished: a consumer whose reservation lapsed, and
-- whose job another consumer now holds or that was pushed again, changes nothing.
--
-- KEYS[1]  the reservations ("delayer:reserved")
-- KEYS[2]  the job pool ("delayer:job_pool")
-- KEYS[3]  the job's bucket
-- ARGV[1]  the id
-- ARGV[2]  the attempt the reservation was (the `attempts` reserve returned)
--
-- Returns 1 when that reservation was current: the job is finished (unless it had been pushed
-- again meanwhile, when only the reservation ends and the new push stands); 2 when it had lapsed
-- and nobody reserved the job since: finished all the same; 0 when it is stale (another
-- reservation since, or pushed again): nothing changed; -1 when there is no such job.

local reserved, pool, bucket, id = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
require_type(reserved, 'zset')
require_type(pool, 'zset')
require_permission('ZREM', reserved, id)
require_permission('ZREM', pool, id)
require_permission('DEL', bucket)

local fields = read_or_false('HMGET', bucket, 'topic', 'attempts')
if not fields or not fields[1] then
  return -1
end
if tonumber(fields[2]) ~= tonumber(ARGV[2]) then
  return 0
end
local was_reserved = redis.call('ZREM', reserved, id)
if redis.call('ZSCORE', pool, id) and was_reserved == 1 then
  -- Pushed again (by a legacy client, which keeps the count) while it was reserved.
  return 1
end
redis.call('ZREM', pool, id)
redis.call('DEL', bucket)
return was_reserved == 1 and 1 or 2
