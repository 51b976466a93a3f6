-- Resumes a paused topic: deletes its pause, then makes due again, at most a number a call, the
-- jobs the move parked in the pool while it was paused (move_due.lua), keeping their order.
--
-- KEYS[1]  the job pool
-- KEYS[2]  the topic's pause key
-- KEYS[3]  the topic's parked set: the ids the move parked
-- ARGV[1]  the job bucket key prefix
-- ARGV[2]  how far after now the move parks a job, in seconds (its recheck)
-- ARGV[3]  the most parked ids to take in this call
--
-- Returns {made due, left in the parked set}: call again while some are left.

local pool, pause, parked = KEYS[1], KEYS[2], KEYS[3]
local bucket_prefix, recheck, most = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
require_type(pool, 'zset')
require_type(parked, 'set')
require_permission('ZADD', pool, '0', 'id')
if redis.replicate_commands then
  -- Redis before 5: a script may write after SPOP (random) only when its effects replicate.
  redis.replicate_commands()
end

redis.call('DEL', pause)
local ids = redis.call('SPOP', parked, most)
local scored = {}
for _, id in ipairs(ids) do
  local bucket = bucket_prefix .. id
  local fields = read_or_false('HMGET', bucket, 'parked')
  local at = fields and tonumber(fields[1])
  local score = tonumber(redis.call('ZSCORE', pool, id))
  -- Only a job still where the move parked it: one pushed again meanwhile keeps its new due time.
  -- Parked `recheck` after the look that found it due, it is due again at that look's time:
  -- never early, and in the order it was parked.
  if at and score and at == score then
    scored[#scored + 1] = score - recheck
    scored[#scored + 1] = id
  end
  if at then
    redis.call('HDEL', bucket, 'parked')
  end
end
if #scored > 0 then
  redis.call('ZADD', pool, unpack(scored))
end
return {#scored / 2, redis.call('SCARD', parked)}
