-- Finds the jobs one reserve call reserved, for a caller whose reply was lost (it timed out, or
-- the connection broke after Redis ran the call): those still reserved until a deadline that call
-- could have set, whose holder (or, for a reservation made before the holders hash, whose
-- bucket's `reserved_by`) names that call's token. Changes nothing.
--
-- KEYS[1]  the reservations ("delayer:reserved")
-- KEYS[2]  the holders ("delayer:reserved:holders"): each reservation's attempt and token
-- ARGV[1]  the reserve call's time to run, in milliseconds
-- ARGV[2]  the reserve call's token
-- ARGV[3]  the job bucket key prefix ("delayer:job_bucket:")
-- ARGV[4]  how long ago the reserve call was sent, in milliseconds: it ran between then and now
-- ARGV[5]  the caller's clock, unix seconds: now, only when this Redis user may not run TIME
-- ARGV[6]  the longest body to return, as reserve.lua's ARGV[9]
--
-- Returns the jobs as reserve.lua returns them (one flat array: a topic, how many jobs follow, four
-- items a job; here each job with its own topic), in the order of their deadlines (one call's jobs
-- share theirs); {} when there is none.

local reserved, token, bucket_prefix = KEYS[1], ARGV[2], ARGV[3]
local most_body = tonumber(ARGV[6])
local latest = clock(ARGV[5]) + tonumber(ARGV[1]) / 1000
-- A second more before: this call took a while to reach Redis after ARGV[4] was measured. A
-- millisecond after: the reserve call's sum may round the other way.
local first = milliseconds_up(latest - tonumber(ARGV[4]) / 1000 - 1)
local last = milliseconds_up(latest + 0.001)
local jobs = {}
local ids = redis.call('ZRANGEBYSCORE', reserved, first, last)
if #ids == 0 then
  return jobs
end
local held_by = read_or_false('HMGET', KEYS[2], unpack(ids)) or {}
for index, id in ipairs(ids) do
  local attempt, holder_token = holder_of(held_by[index])
  -- A holder names the call; a reservation made before the holders hash has none, and its
  -- bucket's `reserved_by` does.
  local bucket = bucket_prefix .. id
  local fields = (not attempt or holder_token == token)
    and read_or_false('HMGET', bucket, 'topic', most_body and 'topic' or 'body', 'attempts', 'due',
      'reserved_by')
  if fields and fields[1] and most_body then
    -- The body apart, read only when short enough.
    fields[2] = body_up_to(bucket, most_body)
  end
  local ours = fields and fields[1] and fields[2]
    and (attempt and holder_token == token or not attempt and fields[5] == token)
  if ours then
    local at = #jobs
    jobs[at + 1], jobs[at + 2], jobs[at + 3] = fields[1], 1, id
    jobs[at + 4], jobs[at + 5] = fields[2], attempt or tonumber(fields[3]) or 0
    jobs[at + 6] = fields[4] or ''
  end
end
return jobs
