-- Pauses, resumes or removes a schedule. A pause takes it out of the schedules by next tick
-- (no daemon claims it) and keeps its next tick; a resume puts it back at that tick, so that the
-- ticks that passed meanwhile go by the catch-up policy. A remove deletes it; jobs it pushed stay.
--
-- KEYS[1]    the schedule's hash
-- KEYS[2]    the schedules by next tick (its shard's)
-- ARGV[1]    "pause", "resume" or "remove"
-- ARGV[2]    the name
-- ARGV[3]    the registry of schedules, or "" where it is in another slot
-- ARGV[4]    the caller's clock, unix seconds: now, only when this Redis user may not run TIME
--
-- Returns "done", "already" (paused already, or not paused) or "gone" (no such schedule).

local schedule, by_next, action, name, registry = KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3]
require_type(schedule, 'hash')
require_type(by_next, 'zset')
local state = redis.call('HMGET', schedule, 'topic', 'paused', 'next')
if not state[1] then
  return 'gone'
end
if action == 'remove' then
  redis.call('DEL', schedule)
  redis.call('ZREM', by_next, name)
  if registry ~= '' then
    redis.pcall('HDEL', registry, name)
  end
elseif action == 'pause' then
  if state[2] then
    return 'already'
  end
  redis.call('HSET', schedule, 'paused', string.format('%.3f', clock(ARGV[4])))
  redis.call('ZREM', by_next, name)
elseif action == 'resume' then
  if not state[2] then
    return 'already'
  end
  redis.call('HDEL', schedule, 'paused')
  redis.call('ZADD', by_next, state[3], name)
else
  error({err = 'ERR unknown schedule action ' .. action})
end
return 'done'
