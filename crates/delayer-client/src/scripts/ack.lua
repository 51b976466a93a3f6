-- Finishes jobs: ends each one's reservation and deletes it, so that it is never delivered again.
-- Only the reservation named (by id and attempt) is finished: a consumer whose reservation lapsed,
-- and whose job another consumer now holds or that was pushed again, changes nothing.
--
-- KEYS[1]  the reservations ("delayer:reserved")
-- KEYS[2]  the job pool ("delayer:job_pool")
-- KEYS[3..]  the jobs' buckets, one a job
-- ARGV  a pair a job, in the order of the buckets: the id, and the attempt the reservation was
--       (the `attempts` reserve returned)
--
-- Returns a code a job, in order: 1 when that reservation was current: the job is finished
-- (unless it had been pushed again meanwhile, when only the reservation ends and the new push
-- stands); 2 when it had lapsed and nobody reserved the job since: finished all the same; 0 when
-- it is stale (another reservation since, or pushed again): nothing changed; -1 when there is no
-- such job. Each job is named once: a second ack in the same call could finish a job pushed again
-- after the first (the first ends the reservation, the second finds the job lapsed).

local reserved, pool = KEYS[1], KEYS[2]
require_type(reserved, 'zset')
require_type(pool, 'zset')
require_permission('ZREM', reserved, 'id')
require_permission('ZREM', pool, 'id')
-- Each job's read too: it comes after the writes of the jobs before it.
for index = 3, #KEYS do
  require_permission('HMGET', KEYS[index], 'topic')
  require_permission('DEL', KEYS[index])
end

local codes = {}
for index = 3, #KEYS do
  local bucket, id, attempt = KEYS[index], ARGV[2 * index - 5], ARGV[2 * index - 4]
  local fields = read_or_false('HMGET', bucket, 'topic', 'attempts')
  if not fields or not fields[1] then
    codes[#codes + 1] = -1
  elseif tonumber(fields[2]) ~= tonumber(attempt) then
    codes[#codes + 1] = 0
  else
    local was_reserved = redis.call('ZREM', reserved, id)
    if redis.call('ZSCORE', pool, id) and was_reserved == 1 then
      -- Pushed again (by a legacy client, which keeps the count) while it was reserved.
      codes[#codes + 1] = 1
    else
      redis.call('ZREM', pool, id)
      redis.call('DEL', bucket)
      codes[#codes + 1] = was_reserved == 1 and 1 or 2
    end
  end
end
return codes
