-- A consumer's heartbeat: writes what it tells of itself to its hash, which lives `kept` on, and
-- scores its entry in the consumers' set by now (Redis's clock); drops the entries whose last
-- beat is older than `kept`, so that the set holds only the consumers seen lately. With no fields,
-- removes the consumer instead (its clean stop).
--
-- KEYS[1]  the consumers: sorted set of consumer id -> its last beat, unix ms ("delayer:consumers")
-- KEYS[2]  the consumer's hash ("delayer:consumer:{delayer:consumers}:<id>")
-- ARGV[1]  the consumer's id
-- ARGV[2]  how long a consumer stays listed after its last beat, in milliseconds
-- ARGV[3]  the caller's clock, unix seconds: now, only when this Redis user may not run TIME
-- ARGV[4..]  field, value pairs of the hash (`started` is written here, at the first beat)
--
-- Returns now by the clock used, in unix milliseconds.

local consumers, hash, id = KEYS[1], KEYS[2], ARGV[1]
require_type(consumers, 'zset')
require_type(hash, 'hash')
local now = math.floor(clock(ARGV[3]) * 1000)
if #ARGV < 4 then
  redis.call('ZREM', consumers, id)
  redis.call('DEL', hash)
  return now
end
local kept = tonumber(ARGV[2])
-- Checked before the first write: a beat is written whole or not at all.
require_permission('HSETNX', hash, 'started', '0')
require_permission('ZADD', consumers, '0', id)
require_permission('ZREMRANGEBYSCORE', consumers, '-inf', '0')
require_permission('PEXPIRE', hash, '1')
redis.call('HSET', hash, unpack(ARGV, 4))
redis.call('HSETNX', hash, 'started', now)
redis.call('PEXPIRE', hash, kept)
redis.call('ZADD', consumers, now, id)
redis.call('ZREMRANGEBYSCORE', consumers, '-inf', '(' .. (now - kept))
return now
