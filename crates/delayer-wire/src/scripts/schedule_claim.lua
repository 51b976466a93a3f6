-- Claims a schedule's tick and pushes its jobs, or a run's job, in one call: the claim is a
-- compare-and-set of the schedule's next tick, so that of all the daemons that claim a tick one
-- pushes its job and the others change nothing. Each job is written as push.lua writes a new
-- one (its bucket {topic, body, due, delay} with a time to live, its entry in the pool).
--
-- KEYS[1]    the schedule's hash
-- KEYS[2]    the schedules by next tick (its shard's)
-- KEYS[3]    the job pool (its topic's)
-- KEYS[3+i]  job i's bucket
-- ARGV[1]    the registry of topics, or "" where it is in another slot
-- ARGV[2]    the caller's clock, unix seconds: now, only when this Redis user may not run TIME
-- ARGV[3]    the name
-- ARGV[4]    the next tick the caller claims (as the hash holds it); "" for a run
-- ARGV[5]    the version of the definition the caller planned with
-- ARGV[6]    the next tick after the claim
-- ARGV[7]    how many ticks the claim counts as missed
-- ARGV[8]    how many of its jobs are missed ticks caught up
-- ARGV[9]    how long a job's data outlives its due time, seconds (ready lifetime)
-- ARGV[10]   what every bucket key starts with (for the last job's, in the same slot)
-- ARGV[11..] two a job, in the order of KEYS: its id, and its due time (unix seconds); a run's
--            due time is "" (now by Redis's clock)
--
-- Returns {outcome, jobs pushed}: outcome "fired"; "skipped" (the overlap policy: the last job
-- is still waiting, ready or reserved; the next tick is set); "lost" (the next tick or the pause
-- is not what the caller saw: another claimed it); "stale" (the definition changed); "gone".

local schedule, by_next, pool = KEYS[1], KEYS[2], KEYS[3]
local topics, name, claimed, version = ARGV[1], ARGV[3], ARGV[4], ARGV[5]
local next_tick, missed, caught_up = ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[8])
local lifetime, bucket_prefix = tonumber(ARGV[9]), ARGV[10]
local run = claimed == ''

require_type(schedule, 'hash')
local state = redis.call('HMGET', schedule, 'next', 'version', 'paused', 'topic', 'body', 'overlap', 'last_job')
if not state[4] then
  return {'gone', 0}
end
if state[2] ~= version then
  return {'stale', 0}
end
if not run and (state[1] ~= claimed or state[3]) then
  return {'lost', 0}
end
require_type(by_next, 'zset')
require_type(pool, 'zset')
for i = 4, #KEYS do
  require_type(KEYS[i], 'hash')
end

local function advance()
  redis.call('HSET', schedule, 'next', next_tick)
  redis.call('ZADD', by_next, next_tick, name)
end

if not run and #KEYS > 3 and state[6] == 'skip' and state[7] then
  local last = bucket_prefix .. state[7]
  if redis.call('EXISTS', last) == 1 and redis.call('HEXISTS', last, 'died_at') == 0 then
    -- The first write: nothing before it.
    advance()
    redis.call('HINCRBY', schedule, 'skipped', 1)
    if missed > 0 then
      redis.call('HINCRBY', schedule, 'missed', missed)
    end
    return {'skipped', 0}
  end
end

local now = clock(ARGV[2])
local topic, body = state[4], state[5] or ''
local pushed, last_id, last_due = 0, nil, nil
for i = 4, #KEYS do
  local bucket, at = KEYS[i], 11 + 2 * (i - 4)
  local id, due = ARGV[at], ARGV[at + 1]
  if due == '' then
    due = string.format('%.3f', math.ceil(now * 1000) / 1000)
  end
  -- An id that exists was pushed already (a run's in the same millisecond): never twice.
  if redis.call('EXISTS', bucket) == 0 then
    local wait = math.max(tonumber(due) - now, 0)
    -- An empty body would read as an expired job to the legacy clients: the id stands in.
    redis.call('HSET', bucket, 'topic', topic, 'body', body ~= '' and body or id, 'due', due,
      'delay', string.format('%.3f', wait))
    redis.call('EXPIRE', bucket, math.max(math.ceil(wait + lifetime), 1))
    redis.call('ZADD', pool, due, id)
    pushed = pushed + 1
  end
  last_id, last_due = id, due
end
if run then
  redis.call('HINCRBY', schedule, 'runs', 1)
else
  advance()
  if pushed > 0 then
    redis.call('HINCRBY', schedule, 'fired', pushed)
  end
  if missed > 0 then
    redis.call('HINCRBY', schedule, 'missed', missed)
  end
  if caught_up > 0 then
    redis.call('HINCRBY', schedule, 'caught_up', caught_up)
  end
end
if last_id then
  redis.call('HSET', schedule, 'last_job', last_id)
  if not run then
    redis.call('HSET', schedule, 'last_tick', last_due)
  end
end
if topics ~= '' and pushed > 0 then
  redis.pcall('SADD', topics, topic)
end
return {'fired', pushed}
