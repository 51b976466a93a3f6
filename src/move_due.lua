-- Moves the jobs that are due from the job pool onto their topics' ready lists, atomically.
--
-- KEYS[1]  the job pool: sorted set of job ids scored by due time in seconds ("delayer:job_pool")
-- ARGV[1]  now, in (fractional) seconds: a job is due when its score <= now
-- ARGV[2]  the most ids to take in this call (the batch size)
-- ARGV[3]  the job bucket key prefix ("delayer:job_bucket:"); a bucket is a hash with field `topic`
-- ARGV[4]  the ready list key prefix ("delayer:ready_queue:")
--
-- Returns {taken, next_due, orphans, stuck, topic_1, ids_1, topic_2, ids_2, ...}:
--   taken     how many ids left the pool (moved + orphans); == ARGV[2]: more may be due
--   next_due  the score of the earliest job due after now, or "" when there is none
--   orphans   ids whose bucket or topic is gone (or not a hash): removed from the pool, pushed nowhere
--   stuck     ids whose ready list key holds something other than a list: left in the pool untouched
--   topic_n, ids_n  every topic pushed to, with its ids in due order (earliest is popped first)

local pool, now, limit = KEYS[1], ARGV[1], tonumber(ARGV[2])
local bucket_prefix, ready_prefix = ARGV[3], ARGV[4]

-- unpack() is bounded by Lua's C stack (LUAI_MAXCSTACK = 8000), so long argument lists go in slices.
local function call_in_slices(command, key, items)
  for first = 1, #items, 1000 do
    redis.call(command, key, unpack(items, first, math.min(first + 999, #items)))
  end
end

-- Stuck ids stay in the pool, and being the earliest they come back first on every call: scan past
-- them, so that they never hold up other topics, but only so far (a call blocks Redis while it runs).
local MAX_SCANS = 8

local topics, ids_by_topic, orphans, stuck, removed = {}, {}, {}, {}, {}
local scanned = 0
for _ = 1, MAX_SCANS do
  local wanted = limit - #removed
  local due = redis.call('ZRANGEBYSCORE', pool, '-inf', now, 'LIMIT', scanned, wanted)
  scanned = scanned + #due
  for _, id in ipairs(due) do
    -- pcall: a bucket key of the wrong type must make an orphan, not an error that wedges the pool.
    local topic = redis.pcall('HGET', bucket_prefix .. id, 'topic')
    if type(topic) ~= 'string' or topic == '' then
      orphans[#orphans + 1] = id
      removed[#removed + 1] = id
    else
      local ids = ids_by_topic[topic]
      if ids == nil then
        -- Checked before any write: a failing LPUSH after the ZREM would lose jobs.
        local kind = redis.call('TYPE', ready_prefix .. topic).ok
        if kind == 'list' or kind == 'none' then
          ids = {}
          topics[#topics + 1] = topic
        else
          ids = false
        end
        ids_by_topic[topic] = ids
      end
      if ids then
        ids[#ids + 1] = id
        removed[#removed + 1] = id
      else
        stuck[#stuck + 1] = id
      end
    end
  end
  if #due < wanted or #removed == limit then
    break
  end
end

local result = {#removed, '', orphans, stuck}
-- Pushes come before the ZREM: if Redis refuses the first write (e.g. out of memory), nothing changed.
for _, topic in ipairs(topics) do
  call_in_slices('LPUSH', ready_prefix .. topic, ids_by_topic[topic])
  result[#result + 1] = topic
  result[#result + 1] = ids_by_topic[topic]
end
call_in_slices('ZREM', pool, removed)

-- Strictly after now: stuck jobs must not make the caller spin.
local next_job = redis.call('ZRANGEBYSCORE', pool, '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
if next_job[2] then
  result[2] = next_job[2]
end
return result
