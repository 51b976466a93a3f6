-- Reserves the oldest ready jobs of the topics, up to a number, first from the first topic that
-- has any: takes each id off its topic's ready list and records it as reserved until a deadline,
-- in one step, so that a consumer that dies holding it loses nothing (the daemon delivers it again
-- once the deadline passes).
--
-- KEYS[1]  the reservations: sorted set of job id -> deadline ("delayer:reserved")
-- KEYS[2]  the job pool ("delayer:job_pool")
-- ARGV[1]  the time to run, in milliseconds: the jobs' deadline is that after now, by Redis's clock
-- ARGV[2]  the job bucket key prefix ("delayer:job_bucket:")
-- ARGV[3]  the ready list key prefix ("delayer:ready_queue:")
-- ARGV[4]  the ready list key suffix ("" in the legacy layout)
-- ARGV[5]  the most jobs to reserve (at least 1)
-- ARGV[6]  this call's token, recorded in each job's bucket (`reserved_by`): a caller whose reply
--          was lost finds the jobs by it and the deadline (find_reserved.lua)
-- ARGV[7]  the topic whose keys these are (the cluster layout's: there every bucket belongs to its
--          slot's topic, whatever its `topic` field says, as the move counts it); "" else, and
--          then an entry whose bucket names another topic is stale (its id pushed again there)
-- ARGV[8]  the caller's clock, unix seconds: now, only when this Redis user may not run TIME
-- ARGV[9..]  the topics, in the order to look at them; a ready list key of the wrong type is passed
--            over, and fails the call (before anything changed but dropped ids) when no other
--            list had a job
--
-- Returns nil when every list is empty; {} when it dropped many ids whose bucket is gone and
-- stopped before it found a job (call again at once); else the jobs, oldest first, each {id, topic,
-- body, attempts, due}: `topic` the one whose list it came from, `due` "" for a job pushed by a
-- legacy client. An id whose bucket is gone (expired, or removed) is dropped, as a legacy pop would
-- drop it.

local reserved, pool = KEYS[1], KEYS[2]
local bucket_prefix, ready_prefix, ready_suffix = ARGV[2], ARGV[3], ARGV[4]
local most, token, own_topic = tonumber(ARGV[5]), ARGV[6], ARGV[7]
-- Bounds one call's work however many dropped ids a list holds.
local MAX_DROPPED = 100

-- Checked before any write: a failing write after the first reservation would leave jobs
-- reserved and ready both (delivered twice), or reserved with the reply lost (held by nobody
-- until their deadline). The reservation comes first of a job's writes, so a reservations key of
-- the wrong type fails the call before anything changed.
require_permission('ZADD', reserved, '0', 'id')
require_permission('HMGET', bucket_prefix .. 'id', 'topic')
require_permission('HSET', bucket_prefix .. 'id', 'attempts', '1')
-- Every list's type up front, for the same reason; one of the wrong type is passed over, so that
-- it does not keep the other topics from being served either. Empty ones need no more look.
local lists, broken = {}, nil
for index = 9, #ARGV do
  local ready = ready_prefix .. ARGV[index] .. ready_suffix
  local kind = redis.call('TYPE', ready).ok
  if kind == 'list' then
    require_permission('LINDEX', ready, '-1')
    require_permission('RPOP', ready)
    lists[#lists + 1] = {ARGV[index], ready}
  elseif kind ~= 'none' and not broken then
    broken = 'WRONGTYPE ' .. ready .. ' holds a ' .. kind .. ', not a list'
  end
end

local jobs, dropped, deadline = {}, 0, nil
for _, list in ipairs(lists) do
  local topic, ready = list[1], list[2]
  while #jobs < most do
    -- The element RPOP would take, read first: a read that fails must fail before any write.
    local id = redis.call('LINDEX', ready, -1)
    if not id then
      break
    end
    local bucket = bucket_prefix .. id
    -- A bucket of the wrong type is dropped like a missing one.
    local fields = read_or_false('HMGET', bucket, 'topic', 'body', 'due', 'attempts')
    -- An entry for a job that waits in the pool again (pushed again after it was moved), is
    -- reserved already (moved twice, or taken earlier in this call), or now belongs to another
    -- topic (its id pushed again there) is stale: taking it would deliver early, twice, or to a
    -- consumer of the wrong topic.
    local stale = (own_topic == '' and fields and fields[1] ~= topic)
      or redis.call('ZSCORE', pool, id) or redis.call('ZSCORE', reserved, id)
    if fields and fields[1] and fields[2] and not stale then
      -- Counted from what was read rather than by HINCRBY, which fails (after the writes) on a
      -- count that is not a whole number: such a count starts again.
      local attempts = attempts_of(fields[4]) + 1
      -- Read once, before the first write.
      deadline = deadline or milliseconds_up(clock(ARGV[8]) + tonumber(ARGV[1]) / 1000)
      redis.call('ZADD', reserved, deadline, id)
      redis.call('RPOP', ready)
      redis.call('HSET', bucket, 'attempts', attempts, 'reserved_by', token)
      jobs[#jobs + 1] = {id, topic, fields[2], attempts, fields[3] or ''}
    else
      redis.call('RPOP', ready)
      dropped = dropped + 1
      if dropped == MAX_DROPPED then
        return #jobs > 0 and jobs or {}
      end
    end
  end
end
if #jobs > 0 then
  return jobs
end
if broken then
  error({err = broken})
end
return nil
