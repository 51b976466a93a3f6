-- Adds a job: its bucket {topic, body, due} and its entry in the job pool, like the legacy clients'
-- MULTI/HMSET/EXPIRE/ZADD/EXEC, but checked first: a key of the wrong type makes the whole push
-- fail, where a transaction would still add the id to the pool without its bucket.
--
-- KEYS[1]  the job pool ("delayer:job_pool")
-- KEYS[2]  the job's bucket ("delayer:job_bucket:<id>")
-- KEYS[3]  the reservations ("delayer:reserved")
-- ARGV[1]  the id
-- ARGV[2]  the topic
-- ARGV[3]  the body
-- ARGV[4]  when it falls due, in unix seconds (fractional), for a job pushed for a time; "" for one
--          pushed with a delay: due ARGV[6] after now, by Redis's clock, to the millisecond and
--          rounded up
-- ARGV[5]  the bucket's time to live in seconds (the delay plus the ready lifetime, as the legacy
--          clients set it)
-- ARGV[6]  the delay it was pushed with, in seconds (for those who ask how it was pushed)
-- ARGV[7]  the registry of topics ("delayer:topics"), or "" for none (the cluster layout, where it
--          lives in another slot and the client adds the topic first). Not a declared key, so
--          that the script's keys stay in the job's slot
-- ARGV[8]  the caller's clock, unix seconds: now, only when this Redis user may not run TIME
--
-- Returns the job's score (when it falls due, unix seconds), or an error naming the key that holds the wrong type (the bucket or the pool) or
-- that this Redis user may not write.

local pool, bucket, reserved, topics = KEYS[1], KEYS[2], KEYS[3], ARGV[7]
-- EXPIRE refuses a time to live past what Redis can hold: refused here, before any write.
local ttl = tonumber(ARGV[5])
if not ttl or ttl < 1 or ttl > 4294967296 then
  error({err = 'ERR the time to live ' .. ARGV[5] .. ' s of ' .. bucket .. ' is not 1 to 2^32 s'})
end
require_type(pool, 'zset')
require_type(bucket, 'hash')
require_permission('EXPIRE', bucket, '1')
require_permission('ZADD', pool, '0', ARGV[1])

local due = ARGV[4]
if due == '' then
  due = string.format('%.3f', math.ceil((clock(ARGV[8]) + tonumber(ARGV[6])) * 1000) / 1000)
end

-- The first write is the only one Redis may refuse for want of memory: nothing is half done.
redis.call('HSET', bucket, 'topic', ARGV[2], 'body', ARGV[3], 'due', due, 'delay', ARGV[6])
-- Pushing an id again starts it afresh: a reservation or a death of the old job does not carry over.
redis.call('HDEL', bucket, 'attempts', 'died_at')
redis.call('EXPIRE', bucket, ARGV[5])
redis.call('ZADD', pool, due, ARGV[1])
-- pcall: a registry or reservation key of the wrong type must not fail a push that is done.
redis.pcall('ZREM', reserved, ARGV[1])
if topics ~= '' then
  redis.pcall('SADD', topics, ARGV[2])
end
return due
