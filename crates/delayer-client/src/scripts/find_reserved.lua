-- Finds the jobs one reserve call reserved, for a caller whose reply was lost (it timed out, or
-- the connection broke after Redis ran the call): those still reserved until that call's deadline
-- whose bucket names that call's token. Changes nothing.
--
-- KEYS[1]  the reservations ("delayer:reserved")
-- ARGV[1]  the reserve call's deadline, in whole unix milliseconds
-- ARGV[2]  the reserve call's token
-- ARGV[3]  the job bucket key prefix ("delayer:job_bucket:")
--
-- Returns the jobs as reserve.lua returns them, in the order of their ids (one call's jobs share
-- their deadline); {} when there is none.

local reserved, deadline, token, bucket_prefix = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local jobs = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', reserved, deadline, deadline)) do
  local fields = read_or_false('HMGET', bucket_prefix .. id, 'topic', 'body', 'attempts', 'due',
    'reserved_by')
  if fields and fields[1] and fields[2] and fields[5] == token then
    jobs[#jobs + 1] = {id, fields[1], fields[2], tonumber(fields[3]) or 0, fields[4] or ''}
  end
end
return jobs
