-- Writes a schedule's definition: creates it, or changes what differs, or nothing when it is the
-- same (so that every daemon that starts with the same configuration file may write it, with
-- the effect of one). A change makes a new version (Redis's time in microseconds, so that a
-- schedule removed and made again never has an old version), and a claim planned from another
-- version is refused; a change of the expression or zone also sets the next tick.
--
-- KEYS[1]    the schedule's hash
-- KEYS[2]    the schedules by next tick (its shard's)
-- ARGV[1]    the registry of schedules (name → topic), or "" where it is in another slot
-- ARGV[2]    the name
-- ARGV[3]    its next tick (unix seconds), for a new schedule or a new expression or zone
-- ARGV[4]    "create" (a schedule of this name must not exist) or "save"
-- ARGV[5]    the source ("file" or "api")
-- ARGV[6]    the caller's clock, unix seconds: now, only when this Redis user may not run TIME
-- ARGV[7..]  the definition's fields and values, in pairs
--
-- Returns "created", "changed", "same", or "exists" (create, and one exists: nothing written).

local schedule, by_next, registry, name = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local next_tick, mode, source = ARGV[3], ARGV[4], ARGV[5]
require_type(schedule, 'hash')
require_type(by_next, 'zset')

local exists = redis.call('EXISTS', schedule) == 1
if exists and mode == 'create' then
  return 'exists'
end
local changed, retimed = not exists, not exists
local fields, topic = {}, nil
for i = 7, #ARGV, 2 do
  local field, value = ARGV[i], ARGV[i + 1]
  if field == 'topic' then
    topic = value
  end
  if not exists or redis.call('HGET', schedule, field) ~= value then
    changed = true
    if field == 'cron' or field == 'zone' then
      retimed = true
    end
  end
  fields[#fields + 1] = field
  fields[#fields + 1] = value
end
if not changed then
  if redis.call('HGET', schedule, 'source') ~= source then
    redis.call('HSET', schedule, 'source', source)
  end
  return 'same'
end

-- Read before the first write (Redis before 5 allows writes after TIME only when asked first).
local version = string.format('%.0f', clock(ARGV[6]) * 1000000)
if version == redis.call('HGET', schedule, 'version') then
  version = version .. '1'
end
-- The first write is the only one Redis may refuse for want of memory: nothing is half done.
redis.call('HSET', schedule, 'source', source, 'version', version, unpack(fields))
if retimed then
  redis.call('HSET', schedule, 'next', next_tick)
  if not redis.call('HGET', schedule, 'paused') then
    redis.call('ZADD', by_next, next_tick, name)
  end
end
if registry ~= '' and topic then
  redis.pcall('HSET', registry, name, topic)
end
return exists and 'changed' or 'created'
