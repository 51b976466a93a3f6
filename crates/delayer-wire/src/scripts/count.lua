-- Adds counts to the history (see history.rs): the daemons' moves, deliveries again and dead
-- jobs, and what clients counted of their pushes and acks. Each count goes to the minute's total
-- and, when its topic is one of the first counted in the minute (at most ARGV[3] of them), to the
-- topic's own hash. Each key lives until ARGV[4] seconds after the minute ends. Best effort: only
-- where this Redis user may write, and a key of another type is left as it is (pcall).
--
-- KEYS[1]    the history's prefix ("delayer:{history}"): never written itself; it names the slot
--            of the minute's keys, which start with it
-- ARGV[1]    the unix minute the counts are of; "" for now, by Redis's clock
-- ARGV[2]    the caller's clock, unix seconds: now, only when this Redis user may not run TIME
-- ARGV[3]    the most topics a minute counts apart
-- ARGV[4]    how long a minute's keys live after it ends, seconds
-- ARGV[5..]  three a count: topic ("" for the total alone), field, how many
--
-- Returns 1 when it wrote, 0 when it did not (this Redis user may not, or the minute is older
-- than its keys live).

local now = clock(ARGV[2])
local minute = ARGV[1] == '' and math.floor(now / 60) or tonumber(ARGV[1])
local total = KEYS[1] .. ':' .. minute
local ttl = math.floor((minute + 1) * 60 + tonumber(ARGV[4]) - now)
if ttl < 1 or not (may('HINCRBY', total, 'f', '1') and may('EXPIRE', total, '1')
    and may('HGET', total, 'f') and may('HSET', total, 'f', '1')) then
  return 0
end
local cap = tonumber(ARGV[3])
-- Whether each topic seen is counted apart this minute.
local apart, touched = {[''] = false}, {total}
for at = 5, #ARGV, 3 do
  local topic, field, n = ARGV[at], ARGV[at + 1], ARGV[at + 2]
  redis.pcall('HINCRBY', total, field, n)
  if apart[topic] == nil then
    local marker = 'topic:' .. topic
    apart[topic] = redis.pcall('HGET', total, marker) == '1'
    if not apart[topic] and (tonumber(redis.pcall('HGET', total, 'topics')) or 0) < cap then
      redis.pcall('HSET', total, marker, '1')
      redis.pcall('HINCRBY', total, 'topics', 1)
      apart[topic] = true
    end
    if apart[topic] then
      touched[#touched + 1] = total .. ':' .. topic
    end
  end
  if apart[topic] then
    redis.pcall('HINCRBY', total .. ':' .. topic, field, n)
  end
end
for _, key in ipairs(touched) do
  redis.pcall('EXPIRE', key, ttl)
end
return 1
