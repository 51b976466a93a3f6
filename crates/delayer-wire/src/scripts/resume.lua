-- Resumes a paused topic: deletes its pause, then makes due again, at most a number a call and
-- earliest first, the jobs the move parked in the pool while it was paused (move_due.lua), each
-- at its own due time: so they move in due order, across calls too.
--
-- KEYS[1]  the job pool
-- KEYS[2]  the topic's pause key
-- KEYS[3]  the topic's parked jobs: a sorted set of the ids the move parked, each scored by its
--          own due time
-- KEYS[4]  the set earlier builds parked ids in: deleted. Their jobs stay where they were parked
--          and move then, a recheck after they were found due, as any parked job of a topic that
--          is not paused
-- ARGV[1]  the job bucket key prefix
-- ARGV[2]  the most parked ids to take in this call (at most 1000)
--
-- Returns {made due, left parked}: call again while some are left.

local pool, pause, parked, parked_set = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local bucket_prefix, most = ARGV[1], tonumber(ARGV[2])
require_type(pool, 'zset')
require_type(parked, 'zset')
require_permission('ZADD', pool, '0', 'id')

local taken = redis.call('ZRANGE', parked, 0, most - 1, 'WITHSCORES')
local ids, dues = {}, {}
for index = 1, #taken, 2 do
  ids[#ids + 1] = taken[index]
  dues[#dues + 1] = taken[index + 1]
end
local pooled = #ids > 0 and scores(pool, ids) or {}
local scored, marked = {}, {}
for index, id in ipairs(ids) do
  local bucket = bucket_prefix .. id
  local fields = read_or_false('HMGET', bucket, 'parked')
  local at = fields and tonumber(fields[1])
  -- Only a job still where the move parked it: one pushed again meanwhile keeps its new due time.
  -- Found due when it was parked, it is never early at its own due time.
  if at and at == tonumber(pooled[index]) then
    scored[#scored + 1] = dues[index]
    scored[#scored + 1] = id
  end
  if at then
    marked[#marked + 1] = bucket
  end
end

-- The jobs of the earlier builds' set lose their marks with it: the move looks for marks only
-- where a topic's parked keys exist (move_due.lua). Once per set, which no build writes any more.
local earlier = may('SMEMBERS', parked_set) and read_or_false('SMEMBERS', parked_set) or {}

redis.call('DEL', pause, parked_set)
for _, id in ipairs(earlier) do
  redis.call('HDEL', bucket_prefix .. id, 'parked')
end
if #scored > 0 then
  redis.call('ZADD', pool, unpack(scored))
end
for _, bucket in ipairs(marked) do
  redis.call('HDEL', bucket, 'parked')
end
if #ids > 0 then
  redis.call('ZREM', parked, unpack(ids))
end
return {#scored / 2, redis.call('ZCARD', parked)}
