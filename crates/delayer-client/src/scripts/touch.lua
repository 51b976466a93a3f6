-- Extends a reservation: the job must now be acked, touched or nacked by the new deadline. Only
-- the reservation named (by id and attempt): a lapsed one cannot be revived over another
-- consumer's.
--
-- KEYS[1]  the reservations ("delayer:reserved")
-- KEYS[2]  the job's bucket
-- ARGV[1]  the time to run from now, in milliseconds: the new deadline is that after now
-- ARGV[2]  the id
-- ARGV[3]  the attempt the reservation was
-- ARGV[4]  the caller's clock, unix seconds: now, only when this Redis user may not run TIME
--
-- Returns 1 when extended, 0 when that reservation is not current.

local reserved, bucket = KEYS[1], KEYS[2]
require_type(reserved, 'zset')
if not redis.call('ZSCORE', reserved, ARGV[2]) then
  return 0
end
local attempts = read_or_false('HGET', bucket, 'attempts')
if tonumber(attempts) ~= tonumber(ARGV[3]) then
  return 0
end
local deadline = milliseconds_up(clock(ARGV[4]) + tonumber(ARGV[1]) / 1000)
redis.call('ZADD', reserved, 'XX', deadline, ARGV[2])
return 1
