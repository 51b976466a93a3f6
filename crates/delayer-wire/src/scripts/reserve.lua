-- Reserves the oldest ready jobs of the topics, up to a number, first from the first topic that
-- has any: takes each id off its topic's ready list and records it as reserved until a deadline,
-- in one step, so that a consumer that dies holding it loses nothing (the daemon delivers it again
-- once the deadline passes).
--
-- KEYS[1]  the reservations: sorted set of job id -> deadline ("delayer:reserved")
-- KEYS[2]  the job pool ("delayer:job_pool")
-- KEYS[3]  the holders: hash of reserved job id -> "<attempt>:<token>" ("delayer:reserved:holders")
-- ARGV[1]  the time to run, in milliseconds: the jobs' deadline is that after now, by Redis's clock
-- ARGV[2]  the job bucket key prefix ("delayer:job_bucket:")
-- ARGV[3]  the ready list key prefix ("delayer:ready_queue:")
-- ARGV[4]  the ready list key suffix ("" in the legacy layout)
-- ARGV[5]  the most jobs to reserve (at least 1)
-- ARGV[6]  this call's token, recorded with each job's attempt in the holders hash: a caller whose
--          reply was lost finds the jobs by it and the deadline (find_reserved.lua)
-- ARGV[7]  the topic whose keys these are (the cluster layout's: there every bucket belongs to its
--          slot's topic, whatever its `topic` field says, as the move counts it); "" else, and
--          then an entry whose bucket names another topic is stale (its id pushed again there)
-- ARGV[8]  the caller's clock, unix seconds: now, only when this Redis user may not run TIME
-- ARGV[9]  the longest body to return, in bytes ("" for any): a job with a longer one is reserved
--          all the same, its length (a number) given for its body, for the caller to give it back
-- ARGV[10..]  the topics, in the order to look at them; a ready list key of the wrong type is
--             passed over, and fails the call (before anything changed but dropped ids) when no
--             other list had a job
--
-- Returns nil when every list is empty; {} when it dropped many ids whose bucket is gone and
-- stopped before it found a job (call again at once); else the jobs, oldest first, in one flat
-- array (a table a job would cost Redis more to reply): for each topic whose list had any, the
-- topic and how many, then four items a job: id, body (or its length: see ARGV[9]), attempts, due
-- (`due` "" for a job pushed by a legacy client). An id whose bucket is gone (expired, or removed) is dropped, as a legacy pop
-- would drop it.
--
-- Every write is one command for many jobs: one HSET of the holders and one ZADD a window of a
-- list (one window, unless entries were dropped), one LTRIM a list. Nothing is written to a job's
-- bucket while it is reserved: its `attempts` field keeps the count of the reservations before
-- this one, the holders hash the current one, and whatever ends the reservation writes it back.

local reserved, pool, holders = KEYS[1], KEYS[2], KEYS[3]
local bucket_prefix, ready_prefix, ready_suffix = ARGV[2], ARGV[3], ARGV[4]
local most, token, own_topic = tonumber(ARGV[5]), ARGV[6], ARGV[7]
local most_body = tonumber(ARGV[9])
-- Bounds one call's work however many dropped ids a list holds.
local MAX_DROPPED = 100

-- Checked before any write: a failing write after the first would leave jobs reserved and ready
-- both (delivered twice), or reserved with the reply lost (held by nobody until their deadline).
require_permission('ZADD', reserved, '0', 'id')
require_permission('HSET', holders, 'id', '1:token')
require_permission('HMGET', bucket_prefix .. 'id', 'topic')
-- Every list's type up front, for the same reason; one of the wrong type is passed over, so that
-- it does not keep the other topics from being served either. Empty ones need no more look.
local lists, broken = {}, nil
for index = 10, #ARGV do
  local ready = ready_prefix .. ARGV[index] .. ready_suffix
  local kind = redis.call('TYPE', ready).ok
  if kind == 'list' then
    require_permission('LRANGE', ready, '-1', '-1')
    require_permission('LTRIM', ready, '0', '-2')
    lists[#lists + 1] = {ARGV[index], ready}
  elseif kind ~= 'none' and not broken then
    broken = 'WRONGTYPE ' .. ready .. ' holds a ' .. kind .. ', not a list'
  end
end

-- For every list, window by window: the ids its oldest entries hold, whether each is in the pool
-- or reserved already, and their buckets; then the window's holders and reservations, so that the
-- next window's look finds them. The lists are trimmed at the end.
local jobs, found, dropped = {}, 0, 0
local scored, held_by, trims, deadline = {}, {}, {}, nil
-- The keys' types are proven by the reads and the first write, and named only when one fails:
-- the writes after the first cannot fail half-way.
local expected = {{reserved, 'zset'}, {pool, 'zset'}, {holders, 'hash'}}
-- The holder of a first attempt, the usual one, made once.
local first_holder = '1:' .. token
for _, list in ipairs(lists) do
  local topic, ready = list[1], list[2]
  -- Entries taken off this list's end (reserved or dropped), and where its jobs start in the reply.
  local taken, first = 0, #jobs + 1
  jobs[first], jobs[first + 1] = topic, 0
  while found < most and dropped < MAX_DROPPED do
    -- (Indexes as text where they can be: a number passed to Redis is printed with printf.)
    local window = taken == 0 and found == 0
      and redis.call('LRANGE', ready, '-' .. ARGV[5], '-1')
      or redis.call('LRANGE', ready, -(taken + most - found), -(taken + 1))
    if #window == 0 then
      break
    end
    local pooled = naming(expected, scores, pool, window)
    local held = naming(expected, scores, reserved, window)
    local before, listed = found, #jobs
    -- The oldest entry is the last.
    for index = #window, 1, -1 do
      if found >= most or dropped >= MAX_DROPPED then
        break
      end
      local id = window[index]
      taken = taken + 1
      -- An entry for a job that waits in the pool again (pushed again after it was moved), is
      -- reserved already (moved twice), or now belongs to another topic (its id pushed again
      -- there) is stale: taking it would deliver early, twice, or to a consumer of the wrong
      -- topic. (One taken earlier in this window is found by the ZADD below.) A bucket of the
      -- wrong type is dropped like a missing one.
      local fields = false
      if not (pooled[index] or held[index]) then
        local bucket = bucket_prefix .. id
        -- With a limit, the body apart: read only when short enough.
        fields = most_body and redis.pcall('HMGET', bucket, 'topic', 'due', 'attempts')
          or redis.pcall('HMGET', bucket, 'topic', 'body', 'due', 'attempts')
        if fields.err then
          -- (read_or_false, inlined: this is the one call a job.)
          if string.sub(fields.err, 1, 9) ~= 'WRONGTYPE' then
            error(fields)
          end
          fields = false
        elseif most_body and fields[1] then
          fields = {fields[1], body_up_to(bucket, most_body), fields[2], fields[3]}
        end
      end
      if fields and fields[1] and fields[2] and (own_topic ~= '' or fields[1] == topic) then
        local attempt = fields[4] and attempts_of(fields[4]) + 1 or 1
        -- Read once, before the first write.
        deadline = deadline or milliseconds_up(clock(ARGV[8]) + tonumber(ARGV[1]) / 1000)
        local at = 2 * found
        scored[at + 1], scored[at + 2] = deadline, id
        held_by[at + 1] = id
        held_by[at + 2] = attempt == 1 and first_holder or attempt .. ':' .. token
        at = #jobs
        jobs[at + 1], jobs[at + 2] = id, fields[2]
        jobs[at + 3], jobs[at + 4] = attempt, fields[3] or ''
        found = found + 1
        jobs[first + 1] = jobs[first + 1] + 1
      else
        dropped = dropped + 1
      end
    end
    if found > before then
      -- The window's holders first: the first write, refused (for want of memory, or a holders
      -- key of the wrong type) before anything changed. Then the reservations: none of these was
      -- reserved (read above), so fewer new than found means an id came twice in this window (its
      -- holder written twice, the same). The oldest is taken, the rest dropped.
      naming(expected, redis.call, 'HSET', holders, unpack(held_by, 2 * before + 1, 2 * found))
      local added = redis.call('ZADD', reserved, unpack(scored, 2 * before + 1, 2 * found))
      if added < found - before then
        local seen, kept = {}, before
        for job = before, found - 1 do
          local at = listed + 4 * (job - before)
          local id = jobs[at + 1]
          if seen[id] then
            dropped = dropped + 1
          else
            seen[id] = true
            local to = listed + 4 * (kept - before)
            for item = 1, 4 do
              jobs[to + item] = jobs[at + item]
            end
            scored[2 * kept + 1], scored[2 * kept + 2] = scored[2 * job + 1], scored[2 * job + 2]
            held_by[2 * kept + 1] = held_by[2 * job + 1]
            held_by[2 * kept + 2] = held_by[2 * job + 2]
            kept = kept + 1
          end
        end
        for item = #jobs, listed + 4 * (kept - before) + 1, -1 do
          jobs[item] = nil
        end
        for item = #scored, 2 * kept + 1, -1 do
          scored[item], held_by[item] = nil, nil
        end
        jobs[first + 1] = jobs[first + 1] - (found - kept)
        found = kept
      end
    end
  end
  if taken > 0 then
    trims[#trims + 1] = {ready, taken}
  end
  if jobs[first + 1] == 0 then
    jobs[first], jobs[first + 1] = nil, nil
  end
end

for _, trim in ipairs(trims) do
  redis.call('LTRIM', trim[1], '0', -(trim[2] + 1))
end
if found > 0 then
  return jobs
end
if dropped >= MAX_DROPPED then
  return {}
end
if broken then
  error({err = broken})
end
return nil
