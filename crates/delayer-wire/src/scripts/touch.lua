-- Extends a reservation: the job must now be acked, touched or nacked by the new deadline. Only
-- the reservation a receipt names: a lapsed one cannot be revived over another consumer's.
--
-- KEYS[1]  the reservations ("delayer:reserved")
-- KEYS[2]  the job's bucket
-- KEYS[3]  the holders ("delayer:reserved:holders"): the reservation's "<attempt>:<token>"
-- ARGV[1]  the time to run from now, in milliseconds: the new deadline is that after now
-- ARGV[2]  the id
-- ARGV[3]  the receipt's attempt
-- ARGV[4]  the caller's clock, unix seconds: now, only when this Redis user may not run TIME
-- ARGV[5]  the receipt's token (the reserve call's); "" for a receipt without one
--
-- Returns 1 when extended, 0 when that reservation is not current, -2 when the receipt has no
-- token and the job's attempts were counted afresh since its first reservation (see ack.lua).

local reserved, bucket, holders = KEYS[1], KEYS[2], KEYS[3]
local id, attempt, token = ARGV[2], ARGV[3], ARGV[5]
require_type(reserved, 'zset')
if not redis.call('ZSCORE', reserved, id) then
  return 0
end
local holder = read_or_false('HGET', holders, id)
-- The bucket only when the holder alone cannot tell: a receipt without a token, or a
-- reservation made before the holders hash.
local fields = (token == '' or not holder)
  and read_or_false('HMGET', bucket, 'attempts', 'recounted', 'reserved_by')
local recounted = fields and fields[2]
if token == '' and recounted then
  return -2
end
local current
if holder then
  current = names(holder, attempt, token, recounted)
else
  current = fields and names_by_bucket(fields[1], fields[3], attempt, token, recounted)
end
if not current then
  return 0
end
local deadline = milliseconds_up(clock(ARGV[4]) + tonumber(ARGV[1]) / 1000)
redis.call('ZADD', reserved, 'XX', deadline, id)
return 1
