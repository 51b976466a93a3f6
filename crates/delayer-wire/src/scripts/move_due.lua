-- Moves the jobs that are due from the job pool onto their topics' ready lists, atomically.
--
-- KEYS[1]  the job pool: sorted set of job ids scored by due time in seconds ("delayer:job_pool")
-- ARGV[1]  the daemon's clock, unix seconds: now, only when this Redis user may not run TIME (a
--          job is due when its score <= now, by Redis's clock)
-- ARGV[2]  the most ids to take in this call (the batch size)
-- ARGV[3]  the job bucket key prefix ("delayer:job_bucket:"); a bucket is a hash with field `topic`
-- ARGV[4]  the ready list key prefix ("delayer:ready_queue:"); a topic's ready list is
--          ARGV[4] .. topic .. ARGV[7]
-- ARGV[5]  how long after now to look at stuck jobs again, in seconds: they are re-scored to that
--          time, a microsecond apart in the order they were due, after any job parked there
--          before, so that they keep their order
-- ARGV[6]  the registry of topics ("delayer:topics"): every topic moved to is added. Not a declared
--          key: Redis checks declared keys against the user's ACL before running, and a user
--          allowed only the legacy keys must still get its jobs moved. "" for none (the cluster
--          layout, where it lives in another slot)
-- ARGV[7]  the ready list key suffix ("" in the legacy layout)
-- ARGV[8]  the topic of every job in this pool, whatever its bucket says: the cluster layout's
--          (only that topic's lists are in the script's slot); "" in the other layouts
-- ARGV[9], ARGV[10]  what comes before and after the topic in its pause's key: a topic whose
--          pause key exists is paused, and its due jobs are parked as a stuck topic's are, each
--          also recorded in its topic's parked jobs, scored by its own due time (the first one,
--          when a recheck parks it again), and in its bucket's `parked` field (the score it was
--          parked at), so that a resume finds them and moves them in due order (resume.lua). A
--          user that may not read the key (the legacy keys only) moves every topic
-- ARGV[11], ARGV[12]  what comes before and after the topic in its parked jobs' key (a sorted set)
-- ARGV[13], ARGV[14]  the same for the set earlier builds parked ids in: a job that moves leaves
--          it, as it leaves the sorted set
-- ARGV[15] the reservations ("delayer:reserved"; their holders hash is that and ":holders"), or
--          "" for none: a due job that a consumer holds was pushed again by a legacy client
--          meanwhile (our pushes end the reservation themselves). The move ends that reservation
--          (its count stays, as a legacy push keeps it), so that the push is delivered and the
--          old holder's ack leaves it alone. Not a declared key, as ARGV[6]
-- ARGV[16] what the compact layout's keys start with ("delayer:compact:"), or "" where there is
--          none. A job that moves while a compact copy of its id waits was pushed again by a
--          legacy client since (our pushes take the other copy themselves): the newer job wins
--          and the compact copy is dropped, so that the id is delivered once, as a push again
--          replaces a job in the legacy layout
-- ARGV[17] "1" to hold back the jobs due at or after the earliest compact window still to be
--          staged, while that window has begun (a backlog: daemons were down): its jobs reach
--          the pool a few hundred at a time, and moving those already there would deliver them
--          out of due order. "" never to hold back (the caller's staging fails: jobs must not
--          wait for it)
--
-- Returns {taken, next_due, orphans, stuck, first_due, last_due, now, by_redis, replaced, topic_1,
-- ids_1, ...}:
--   taken     how many due ids this call dealt with (moved + orphans + parked); == ARGV[2]: more
--             may be due
--   next_due  the score of the earliest job due after now, or "" when there is none
--   orphans   ids whose bucket or topic is gone (or not a hash): removed from the pool, pushed nowhere
--   stuck     {topic, why, count} for each topic whose jobs cannot move: `why` is what its ready
--             list key holds instead of a list ("string", "hash", ...), "noperm" when this
--             Redis user may not write it (ACL), or "paused"; its jobs stay in the pool, parked
--             ARGV[5] after now
--   first_due, last_due  the scores of the earliest and the latest job this call took ("" when it
--             took none): how late the batch was moved, for the daemon's metrics
--   now       the time the call went by, unix seconds
--   by_redis  1 when that was Redis's clock, 0 when it was ARGV[1] (TIME refused)
--   replaced  the moving ids whose compact copy was dropped (see ARGV[16])
--   topic_n, ids_n  every topic pushed to, with its ids in due order (earliest is popped first)

local pool, limit, registry = KEYS[1], tonumber(ARGV[2]), ARGV[6]
local bucket_prefix, ready_prefix = ARGV[3], ARGV[4]
local seconds, by_redis = clock(ARGV[1])
local now, park_at = decimal(seconds), seconds + tonumber(ARGV[5])
local ready_suffix, own_topic = ARGV[7], ARGV[8]
local paused_prefix, paused_suffix, parked_prefix, parked_suffix = ARGV[9], ARGV[10], ARGV[11], ARGV[12]
local parked_set_prefix, parked_set_suffix = ARGV[13], ARGV[14]
local reserved, compact, hold = ARGV[15], ARGV[16], ARGV[17] == '1'
require_permission('ZREM', pool, 'id')
require_permission('ZADD', pool, '0', 'id')

-- The jobs taken are those due by `upto`: now, or before the earliest compact window still being
-- staged when that has begun (see ARGV[17]). pcall: a key of the wrong type holds nothing back
-- (staging names it).
local upto = now
if hold and compact ~= '' and may('ZRANGE', compact .. 'chunks', '0', '0') then
  local first = redis.pcall('ZRANGE', compact .. 'chunks', 0, 0, 'WITHSCORES')
  if not first.err and first[2] and tonumber(first[2]) <= seconds then
    upto = '(' .. first[2]
  end
end

-- unpack() is bounded by Lua's C stack (LUAI_MAXCSTACK = 8000), so long argument lists go in slices.
local function call_in_slices(command, key, items)
  for first = 1, #items, 1000 do
    redis.call(command, key, unpack(items, first, math.min(first + 999, #items)))
  end
end

local topics, ids_by_topic, orphans, removed, reborn, unparked = {}, {}, {}, {}, {}, {}
-- Moving jobs whose bucket names a reservation that ended (`ended`: see release.lua).
local ended = {}
-- A stuck topic's jobs would come back first on every call and hold up every later job: parked
-- out of the due range instead, each call still touches at most `limit` ids.
local stuck_topics, stuck_by_topic, parked, paused_topic, parked_mark = {}, {}, {}, {}, {}
-- A job's topic and marks (`died_at`, `parked`, `ended`: see below), or false for a bucket that is
-- gone or not a hash.
local function read_job(id)
  local fields = read_or_false('HMGET', bucket_prefix .. id, 'topic', 'died_at', 'parked', 'ended')
  return fields and fields[1], fields
end

-- Whether compact copies of moving ids may wait (see ARGV[16]): only while the index exists.
local index = compact .. 'index'
local copies = compact ~= '' and may('EXISTS', index) and may('HMGET', index, 'id')
    and may('HDEL', index, 'id') and may('LSET', compact .. 'chunk:1', '0', '')
    and redis.pcall('EXISTS', index) == 1
-- The moving ids that may have a compact copy.
local legacy_pushed = {}

-- The due ids, in due order, and where it can, each one's `topic` and `attempts` too, all in one
-- SORT: Redis reads them for the whole batch at C speed, where a read from Lua for each job (a
-- call, its reply made and parsed, a table) costs as much as the rest of its move. Only a job
-- with `attempts` can carry `died_at` or `ended` (reserve counts every job it hands out, and the
-- scripts that mark a job write or keep its count: release.lua, ack.lua), so only those are read
-- again in full; `parked` is looked for a topic at a time, below. Redis refuses SORT's GET to a
-- user that may not read every key (the patterns are not declared keys) and on a cluster, and
-- Redis 6 cannot say beforehand whether the user may run ZCOUNT and SORT (a refused call is
-- logged): there each job is read in full, as before.
local due, listed = nil, nil
local count = own_topic == '' and redis.acl_check_cmd and may('ZCOUNT', pool, '-inf', now)
  and redis.pcall('ZCOUNT', pool, '-inf', upto)
if type(count) == 'number' and may('SORT', pool) then
  count = math.min(count, limit)
  listed = count == 0 and {} or redis.pcall('SORT', pool, 'BY', 'nosort', 'LIMIT', 0, count,
    'GET', '#', 'GET', bucket_prefix .. '*->topic', 'GET', bucket_prefix .. '*->attempts')
  if listed.err then
    listed = nil
  else
    due = {}
    for row = 1, #listed, 3 do
      due[#due + 1] = listed[row]
    end
  end
end
if not listed then
  due = redis.call('ZRANGEBYSCORE', pool, '-inf', upto, 'LIMIT', 0, limit)
end
local first_due, last_due = '', ''
if #due > 0 then
  first_due = redis.call('ZSCORE', pool, due[1])
  last_due = redis.call('ZSCORE', pool, due[#due])
end
-- Only a legacy client's push can leave a compact copy (ours take it), and it scores a whole
-- second where ours and staging score the millisecond: the ids due at each whole second of the
-- batch are the ones looked up (as a rule none, while compact jobs move). Over many seconds, or
-- when the whole batch is due at one whole second, every moving id is. nil: every one.
local at_whole_seconds = {}
if copies and #due > 0 then
  local from, to = math.ceil(tonumber(first_due)), math.floor(tonumber(last_due))
  if from == to and tonumber(first_due) == from and tonumber(last_due) == to then
    at_whole_seconds = nil
  elseif to - from < 64 then
    for second = from, to do
      for _, id in ipairs(redis.call('ZRANGEBYSCORE', pool, second, second, 'LIMIT', 0, limit)) do
        at_whole_seconds[id] = true
      end
    end
  else
    at_whole_seconds = nil
  end
end
-- Whether a topic's jobs may carry `parked`: only while the parked jobs' keys exist (resume.lua
-- forgets the marks of the jobs it takes from them).
local parked_here = {}
local none = {}
for index, id in ipairs(due) do
  local topic, fields
  if listed and not listed[3 * index] then
    topic = listed[3 * index - 1]
  else
    topic, fields = read_job(id)
  end
  if not topic or topic == '' then
    orphans[#orphans + 1] = id
    removed[#removed + 1] = id
  else
    if own_topic ~= '' then
      topic = own_topic
    end
    local ids = ids_by_topic[topic]
    if ids == nil then
      -- Checked before any write: a failing LPUSH after the ZREM would lose jobs.
      local ready = ready_prefix .. topic .. ready_suffix
      local pause = paused_prefix .. topic .. paused_suffix
      local why
      -- pcall: Redis 6 cannot be asked first, and a user that may not read the key moves the topic.
      local pause_kind = may('TYPE', pause) and redis.pcall('TYPE', pause)
      if pause_kind and pause_kind.ok and pause_kind.ok ~= 'none' then
        why = 'paused'
      else
        why = redis.call('TYPE', ready).ok
        if why == 'list' or why == 'none' then
          why = may('LPUSH', ready, 'id') and '' or 'noperm'
        end
      end
      if why == '' then
        ids = {}
        topics[#topics + 1] = topic
      else
        ids = false
        stuck_topics[#stuck_topics + 1] = topic
        stuck_by_topic[topic] = {topic, why, 0}
      end
      ids_by_topic[topic] = ids
      if listed then
        local parked_jobs = parked_prefix .. topic .. parked_suffix
        local parked_set = parked_set_prefix .. topic .. parked_set_suffix
        -- A user that may not read them reads every job of the topic in full.
        local found = may('EXISTS', parked_jobs, parked_set)
          and redis.pcall('EXISTS', parked_jobs, parked_set)
        parked_here[topic] = type(found) ~= 'number' or found > 0
      end
    end
    if not fields then
      fields = parked_here[topic] and select(2, read_job(id)) or none
    end
    if ids then
      ids[#ids + 1] = id
      removed[#removed + 1] = id
      if fields[2] then
        reborn[#reborn + 1] = id
      end
      if fields[3] then
        unparked[#unparked + 1] = {id, topic}
      end
      if fields[4] then
        ended[#ended + 1] = id
      end
      if copies and (at_whole_seconds == nil or at_whole_seconds[id]) then
        legacy_pushed[#legacy_pushed + 1] = id
      end
    else
      local entry = stuck_by_topic[topic]
      entry[3] = entry[3] + 1
      parked[#parked + 1] = id
      paused_topic[#parked] = entry[2] == 'paused' and topic
      parked_mark[#parked] = fields[3]
    end
  end
end

-- Calls found(id, value) for each id of the lists `of` that hash `key` has a field of: HMGET in
-- slices (pcall: a key of another type has none).
local function each_field_of(key, of, found)
  for _, moving in ipairs(of) do
    for first = 1, #moving, 1000 do
      local last = math.min(first + 999, #moving)
      local values = redis.pcall('HMGET', key, unpack(moving, first, last))
      if not values.err then
        for at = first, last do
          if values[at - first + 1] then
            found(moving[at], values[at - first + 1])
          end
        end
      end
    end
  end
end

-- The moving jobs that a consumer holds (see ARGV[15]), with their holders: one look at the
-- holders' type, and only where there are holders, their entries for these ids. pcall: a user that
-- may not read them (the legacy keys only) still gets its jobs moved.
local holders = reserved ~= '' and reserved .. ':holders'
local superseded = {}
if holders and #topics > 0 and may('TYPE', holders) and may('HMGET', holders, 'id')
    and redis.pcall('TYPE', holders).ok == 'hash' then
  local moving = {}
  for _, topic in ipairs(topics) do
    moving[#moving + 1] = ids_by_topic[topic]
  end
  each_field_of(holders, moving, function(id, holder)
    superseded[#superseded + 1] = {id, holder}
  end)
end

-- A job whose reservation ended comes back to the pool by a retry (a fraction of a second) or
-- by a legacy client's push (whole seconds): a push is another job, which no receipt of the
-- ended reservation may finish (ack.lua), so its `ended` is forgotten as it moves.
local unended = {}
for first = 1, #ended, 1000 do
  local slice = {unpack(ended, first, math.min(first + 999, #ended))}
  for index, score in ipairs(scores(pool, slice)) do
    if whole_seconds(score) then
      unended[#unended + 1] = slice[index]
    end
  end
end

-- Compact copies of the moving ids that a legacy client pushed (see `copies`), found before the
-- first write. pcall: none of this may stop a move.
local replaced = {}
if #legacy_pushed > 0 then
  each_field_of(index, {legacy_pushed}, function(id)
    local chunk, position, entry = compact_find(compact, id)
    if chunk and compact_unpack(entry).id == id then
      replaced[#replaced + 1] = {id, chunk, position}
    end
  end)
end

local stuck = {}
for _, topic in ipairs(stuck_topics) do
  stuck[#stuck + 1] = stuck_by_topic[topic]
end
local replaced_ids = {}
for _, copy in ipairs(replaced) do
  replaced_ids[#replaced_ids + 1] = copy[1]
end
local result = {#due, '', orphans, stuck, first_due, last_due, now, by_redis and 1 or 0,
  replaced_ids}
-- Pushes come before the ZREM: if Redis refuses the first write (e.g. out of memory), nothing changed.
for _, topic in ipairs(topics) do
  call_in_slices('LPUSH', ready_prefix .. topic .. ready_suffix, ids_by_topic[topic])
  -- pcall: the registry only helps to list topics; it must never stop a move.
  if registry ~= '' then
    redis.pcall('SADD', registry, topic)
  end
  result[#result + 1] = topic
  result[#result + 1] = ids_by_topic[topic]
end
call_in_slices('ZREM', pool, removed)
-- A dead job in the pool was pushed again by a legacy client, which leaves its count and death in
-- place: it starts afresh, as our push starts it, or a requeue of the dead list would deliver it
-- twice. A user that may not run HDEL (the documented ACL before it was added) still gets its
-- jobs moved: asked first where Redis can say, and pcall where it cannot (Redis 6).
for _, id in ipairs(reborn) do
  local bucket = bucket_prefix .. id
  if may('HDEL', bucket, 'attempts') then
    redis.pcall('HDEL', bucket, 'attempts', 'died_at', 'ended')
    -- Counted afresh: an attempt alone no longer names one reservation.
    redis.pcall('HSET', bucket, 'recounted', '1')
  end
end

for _, id in ipairs(unended) do
  redis.pcall('HDEL', bucket_prefix .. id, 'ended')
end

for _, copy in ipairs(replaced) do
  redis.pcall('HDEL', index, copy[1])
  redis.pcall('LSET', copy[2], copy[3], '')
end

-- Reservations a legacy push superseded (see ARGV[15]). pcall: none of this may stop a move.
if #superseded > 0 and may('ZREM', reserved, 'id') and may('HDEL', holders, 'id') then
  for _, job in ipairs(superseded) do
    local id, bucket = job[1], bucket_prefix .. job[1]
    redis.pcall('ZREM', reserved, id)
    redis.pcall('HDEL', holders, id)
    local attempt = holder_of(job[2])
    if attempt then
      redis.pcall('HSET', bucket, 'attempts', attempt)
    end
    redis.pcall('HDEL', bucket, 'ended')
  end
end

-- A job parked while its topic was paused moves now (resumed without resume.lua, e.g. its key
-- deleted by hand, or parked by an earlier build): its marks go, so that a later resume does not
-- take it for parked.
for _, job in ipairs(unparked) do
  local bucket = bucket_prefix .. job[1]
  if may('HDEL', bucket, 'parked') then
    redis.pcall('HDEL', bucket, 'parked')
  end
  local parked_jobs = parked_prefix .. job[2] .. parked_suffix
  if may('ZREM', parked_jobs, job[1]) then
    redis.pcall('ZREM', parked_jobs, job[1])
  end
  local parked_set = parked_set_prefix .. job[2] .. parked_set_suffix
  if may('SREM', parked_set, job[1]) then
    redis.pcall('SREM', parked_set, job[1])
  end
end

if #parked > 0 then
  -- After what an earlier call (perhaps another daemon's, its clock a little ahead) parked just
  -- there: a double resolves ~0.24 us at today's unix times, so 1 us steps keep the order.
  local last = redis.call('ZREVRANGEBYSCORE', pool, park_at + 1, park_at, 'WITHSCORES', 'LIMIT', 0, 1)
  local base = last[2] and math.max(park_at, tonumber(last[2]) + 0.000001) or park_at
  -- A paused topic's jobs are recorded with their own due time, their score before this park:
  -- read for them alone, so that moves pay nothing for it.
  local held, held_ids = {}, {}
  for index, id in ipairs(parked) do
    if paused_topic[index] then
      held[#held + 1] = index
      held_ids[#held_ids + 1] = id
    end
  end
  local due_of = {}
  for place, score in ipairs(#held_ids > 0 and scores(pool, held_ids) or {}) do
    due_of[held[place]] = score
  end
  local scored = {}
  for index, id in ipairs(parked) do
    scored[#scored + 1] = base + (index - 1) * 0.000001
    scored[#scored + 1] = id
  end
  -- Score/id pairs: slices of 1000 items never split a pair.
  call_in_slices('ZADD', pool, scored)
  -- After the ZADD: marks of a job that did not get parked would mislead a resume. pcall: the
  -- marks only speed up a resume; without them a paused topic's jobs still wait, and move a
  -- recheck after it.
  for _, index in ipairs(held) do
    local id, due_at = parked[index], due_of[index]
    redis.pcall('HSET', bucket_prefix .. id, 'parked', scored[2 * index - 1])
    -- Found again at its recheck (still at the score it was parked at): its first due time stays.
    local again = parked_mark[index] and tonumber(parked_mark[index]) == tonumber(due_at)
    local parked_jobs = parked_prefix .. paused_topic[index] .. parked_suffix
    if again then
      redis.pcall('ZADD', parked_jobs, 'NX', due_at, id)
    else
      redis.pcall('ZADD', parked_jobs, due_at, id)
    end
  end
end

-- Strictly after now: jobs parked just now are found when they are due to be looked at again.
local next_job = redis.call('ZRANGEBYSCORE', pool, '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
if next_job[2] then
  result[2] = next_job[2]
end
return result
