-- Makes waiting jobs due now, by Redis's clock ("run now"): each job the pool holds is scored
-- now, unless it is due already, so that the daemon, woken by the write to the pool, moves it at
-- once. A job's bucket `due` (our pushes write it) says so too.
--
-- KEYS[1]  the job pool
-- ARGV[1]  the caller's clock, unix seconds: now, only when this Redis user may not run TIME
-- ARGV[2]  the job bucket key prefix
-- ARGV[3]  the topic every job must be of, "" for any: a job of another topic (its id pushed
--          again there) is not waiting as far as this call goes
-- ARGV[4..]  the jobs' ids
--
-- Returns a code a job, in order:
--    1  it was waiting: it is due now
--    2  it was due already (the daemon has not moved it yet): unchanged
--    0  it is not waiting: not in the pool (ready, reserved or dead), or of another topic
--   -1  there is no such job: no data (an id in the pool without data is the move's to drop)

local pool, bucket_prefix, topic = KEYS[1], ARGV[2], ARGV[3]
require_type(pool, 'zset')
require_permission('ZADD', pool, '0', 'id')
local seconds = clock(ARGV[1])

-- The move and ack tell a legacy client's push (whole seconds) from a retry of ours (a fraction)
-- by the score (prelude's whole_seconds): a job keeps its kind. Either way not after now.
local whole, fraction = string.format('%.0f', math.floor(seconds)), decimal(seconds)
if whole_seconds(fraction) then
  fraction = decimal(seconds - 0.000001)
end

local ids = {unpack(ARGV, 4)}
local pooled = #ids > 0 and scores(pool, ids) or {}
local codes, scored, dated = {}, {}, {}
for index, id in ipairs(ids) do
  local bucket = bucket_prefix .. id
  local fields = read_or_false('HMGET', bucket, 'topic', 'due')
  local of = fields and fields[1]
  local score = pooled[index]
  if not of or of == '' then
    codes[index] = -1
  elseif not score or (topic ~= '' and of ~= topic) then
    codes[index] = 0
  elseif tonumber(score) <= seconds then
    codes[index] = 2
  else
    codes[index] = 1
    local now = whole_seconds(score) and whole or fraction
    scored[#scored + 1] = now
    scored[#scored + 1] = id
    if fields[2] then
      -- As our pushes write it: unix seconds to the millisecond (rounded down: not after the
      -- score).
      dated[#dated + 1] = {bucket, string.format('%.3f', math.floor(tonumber(now) * 1000) / 1000)}
    end
  end
end

-- Asked only when a bucket has `due` to write: a user of the legacy keys alone runs their jobs.
if #dated > 0 then
  require_permission('HSET', bucket_prefix .. 'id', 'due', '0')
end
if #scored > 0 then
  redis.call('ZADD', pool, unpack(scored))
end
for _, job in ipairs(dated) do
  redis.call('HSET', job[1], 'due', job[2])
end
return codes
