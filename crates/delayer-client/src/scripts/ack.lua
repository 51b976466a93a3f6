-- Finishes a job: ends its reservation and deletes it (its bucket, and its entry in the pool if it
-- was put back there meanwhile), so that it is never delivered again.
--
-- KEYS[1]  the reservations ("delayer:reserved")
-- KEYS[2]  the job pool ("delayer:job_pool")
-- KEYS[3]  the job's bucket
-- ARGV[1]  the id
--
-- Returns 1 when the job was reserved; 0 when it existed but its reservation had ended (its
-- deadline passed and it was, or is about to be, delivered again): it is finished all the same;
-- -1 when there was no such job.

require_permission('ZREM', KEYS[2], ARGV[1])
require_permission('DEL', KEYS[3])
local was_reserved = redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
local existed = redis.call('DEL', KEYS[3])
if was_reserved == 1 then
  return 1
elseif existed == 1 then
  return 0
end
return -1
