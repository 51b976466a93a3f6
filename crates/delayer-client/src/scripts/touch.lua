-- Extends a reservation: the job must now be acked, touched or nacked by the new deadline. Only
-- the reservation named (by id and attempt): a lapsed one cannot be revived over another
-- consumer's.
--
-- KEYS[1]  the reservations ("delayer:reserved")
-- KEYS[2]  the job's bucket
-- KEYS[3]  the holders ("delayer:reserved:holders"): the reservation's attempt
-- ARGV[1]  the time to run from now, in milliseconds: the new deadline is that after now
-- ARGV[2]  the id
-- ARGV[3]  the attempt the reservation was
-- ARGV[4]  the caller's clock, unix seconds: now, only when this Redis user may not run TIME
--
-- Returns 1 when extended, 0 when that reservation is not current.

local reserved, bucket, holders = KEYS[1], KEYS[2], KEYS[3]
require_type(reserved, 'zset')
if not redis.call('ZSCORE', reserved, ARGV[2]) then
  return 0
end
-- The holders' attempt; the bucket's for a reservation made before the holders hash.
local attempts = holder_of(read_or_false('HGET', holders, ARGV[2]))
  or read_or_false('HGET', bucket, 'attempts')
if tonumber(attempts) ~= tonumber(ARGV[3]) then
  return 0
end
local deadline = milliseconds_up(clock(ARGV[4]) + tonumber(ARGV[1]) / 1000)
redis.call('ZADD', reserved, 'XX', deadline, ARGV[2])
return 1
