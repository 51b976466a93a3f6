-- Adds jobs, each as the legacy clients' MULTI/HMSET/EXPIRE/ZADD/EXEC adds one (its bucket
-- {topic, body, due, delay} and its entry in the job pool), but all checked before the first
-- write: one bad job, or a key of the wrong type, and nothing is written, where a transaction
-- would still add an id to the pool without its bucket. Every job's keys are in one slot (one
-- pool; in the cluster layout, one topic's).
--
-- KEYS[1]    the job pool ("delayer:job_pool")
-- KEYS[2]    the reservations ("delayer:reserved")
-- KEYS[2+i]  job i's bucket ("delayer:job_bucket:<id>")
-- ARGV[1]    the registry of topics ("delayer:topics"), or "" for none (the cluster layout, where
--            it lives in another slot and the client adds the topics first). Not a declared key,
--            so that the script's keys stay in the jobs' slot
-- ARGV[2]    the caller's clock, unix seconds: now, only when this Redis user may not run TIME
-- ARGV[3]    what the compact layout's keys start with ("delayer:compact:"), or "" where there is
--            none
-- ARGV[4]    the shortest delay, in seconds, a job waits compact with; "" for none: every job
--            in the legacy form
-- ARGV[5]    whether a daemon stages compact jobs: "ask" to read its beats here (one Redis);
--            "yes" or "no" as the caller read them (the cluster layout, where the beats and the
--            `wanted` key are in another slot: the caller writes `wanted` then)
-- ARGV[6..]  six a job, in the order of KEYS:
--              id, topic, body;
--              when it falls due, in unix seconds (fractional), for a job pushed for a time; ""
--              for one pushed with a delay: due the delay after now, by Redis's clock, to the
--              millisecond and rounded up;
--              the bucket's time to live in seconds (the delay plus the ready lifetime, as the
--              legacy clients set it);
--              the delay it was pushed with, in seconds (for those who ask how it was pushed)
-- ARGV[6+6n..] optional, after the n jobs: a hash, then field-value pairs set in it with the jobs
--            (a mark of what was pushed, written in the same call, so that a producer that must
--            push each thing once never has the one without the other). Not a declared key: one
--            Redis only (the client sets the mark apart in the cluster layout)
--
-- A job waits compact (see compact.rs) when compact pushes are asked for, it falls due at least
-- ARGV[4] after now by Redis's clock, its id has no bucket, its data expires before 2106 (a
-- chunk's entry holds that time in 32 bits), and a daemon that stages compact jobs beat lately
-- (else the push leaves the `wanted` key, and goes legacy; see ARGV[5]). A job pushed in one
-- form takes the place of a copy of its id in the other. A key of the layout that holds another
-- type (written by hand) makes the jobs it would hold legacy ones: a push never fails for it.
--
-- Returns how many jobs it wrote (all of them), or an error naming the job's key that holds the
-- wrong type, whose time to live is out of range, or that this Redis user may not write.

local pool, reserved, topics = KEYS[1], KEYS[2], ARGV[1]
local compact, compact_after, stagers = ARGV[3], tonumber(ARGV[4]), ARGV[5]
local count = #KEYS - 2
local BASE = 5
local marked = #ARGV - BASE - 6 * count
if marked ~= 0 and (marked < 3 or marked % 2 == 0) then
  error({err = 'ERR push wants six arguments a job, then optionally a hash and field-value pairs'})
end
local mark = marked > 0 and ARGV[BASE + 1 + 6 * count]

require_type(pool, 'zset')
if mark then
  require_type(mark, 'hash')
  require_permission('HSET', mark, 'f', 'v')
end
require_permission('ZADD', pool, '0', ARGV[BASE + 1])
-- How many of the buckets exist, in one command: new ids, the usual case, then need no look at
-- each bucket's type (a TYPE a job costs Redis a tenth of the push). nil when this Redis user may
-- not run EXISTS: each bucket is looked at.
local existing = count > 0 and may('EXISTS', KEYS[3]) and redis.pcall('EXISTS', unpack(KEYS, 3))
if type(existing) ~= 'number' then
  existing = nil
end
-- Whether each bucket exists: a new one has no reservation fields to clear.
local existed, by_delay = {}, false
for i = 1, count do
  local bucket, at = KEYS[2 + i], BASE + 6 * (i - 1)
  local ttl = tonumber(ARGV[at + 5])
  if not ttl or ttl < 1 or ttl > 4294967296 then
    error({err = 'ERR the time to live ' .. ARGV[at + 5] .. ' s of ' .. bucket .. ' is not 1 to 2^32 s'})
  end
  local kind = existing == 0 and 'none' or redis.call('TYPE', bucket).ok
  if kind ~= 'none' and kind ~= 'hash' then
    error({err = 'WRONGTYPE ' .. bucket .. ' holds a ' .. kind .. ', not a hash'})
  end
  existed[i] = kind ~= 'none'
  require_permission('EXPIRE', bucket, '1')
  by_delay = by_delay or ARGV[at + 4] == ''
end

-- Whether this push may write compact jobs: asked, allowed by the ACL, and a daemon stages them.
local index = compact .. 'index'
local usable = compact_usable(compact)
local compacting = compact_after ~= nil and usable
    and may('RPUSH', compact .. 'chunk:1', 'x') and may('LLEN', compact .. 'chunk:1')
    and may('HSET', index, 'f', 'v') and may('ZADD', compact .. 'chunks', '0', 'x')
    and may('HSET', compact .. 'open', 'f', 'v') and may('HGET', compact .. 'open', 'f')
    and may('INCR', compact .. 'next') and stagers ~= 'no'
    and (stagers == 'yes' or may('SET', compact .. 'wanted', '1')
      and may('ZRANGEBYSCORE', compact .. 'stagers', '0', '1'))
-- Read before the first write (Redis before 5 allows writes after TIME only when asked first).
local now = (by_delay or compacting) and clock(ARGV[2])
-- Whether a daemon stages compact jobs, asked once a call, when a job would wait compact: nil
-- until then (true from the start when the caller read the beats).
local staged = stagers == 'yes' or nil
local function staging()
  if staged == nil then
    local fresh = milliseconds_up(now - BEAT_FRESH)
    local beats = redis.pcall('ZRANGEBYSCORE', compact .. 'stagers', fresh, '+inf', 'LIMIT', 0, 1)
    -- A beats key of another type: no daemon can beat there, and nobody stages.
    staged = not beats.err and #beats > 0
    if not staged and not beats.err then
      -- Tells the daemons that pushes want it: one that can stage starts, and beats.
      redis.call('SET', compact .. 'wanted', '1', 'EX', 86400)
    end
  end
  return staged
end
-- Whether some job waits compact now: only then can an id pushed have a compact copy.
local indexed = usable and redis.call('EXISTS', index) == 1
-- Which of the ids pushed again are reserved now (pcall: a holders key of the wrong type must not
-- fail a push).
local holders, held = reserved .. ':holders', {}
local again = {}
for i = 1, count do
  if existed[i] then
    again[#again + 1] = ARGV[BASE + 6 * (i - 1) + 1]
  end
end
if #again > 0 then
  local reply = redis.pcall('HMGET', holders, unpack(again))
  if type(reply) == 'table' and not reply.err then
    for index, id in ipairs(again) do
      held[id] = reply[index]
    end
  end
end
local scored, ids, named = {}, {}, {}
-- The chunk each window's jobs go to in this call, and how many it holds; false for a window
-- whose jobs go legacy (a key of the layout holds another type).
local filling = {}
-- The first chunk number from `next` whose key is free, or nil (`next` or every key tried holds
-- another type). Only a free key becomes a chunk: RPUSH must not fail after the writes before it.
local function new_chunk()
  for _ = 1, 8 do
    local number = redis.pcall('INCR', compact .. 'next')
    if type(number) ~= 'number' then
      return nil
    end
    if redis.call('TYPE', compact .. 'chunk:' .. number).ok == 'none' then
      return number
    end
  end
  return nil
end
-- The chunk `window`'s jobs go to in this call (false: none, they go legacy), opened when
-- needed. Reads first: the writes that open a chunk cannot then fail.
local function chunk_of(window)
  local chunk = filling[window]
  if chunk == nil then
    local number = redis.pcall('HGET', compact .. 'open', window)
    if type(number) == 'table' then
      chunk = false
    else
      number = tonumber(number)
      local size = number and redis.pcall('LLEN', compact .. 'chunk:' .. number)
      -- An open chunk whose key now holds another type is full as far as pushes go.
      if type(size) ~= 'number' then
        number, size = nil, nil
      end
      chunk = {number = number, size = size}
    end
    filling[window] = chunk
  end
  if chunk and (not chunk.number or chunk.size >= CHUNK_JOBS) then
    local number = new_chunk()
    if not number then
      filling[window] = false
      return false
    end
    chunk.number, chunk.size = number, 0
    redis.call('HSET', compact .. 'open', window, number)
    redis.call('ZADD', compact .. 'chunks', window, number)
  end
  return chunk
end
for i = 1, count do
  local bucket, at = KEYS[2 + i], BASE + 6 * (i - 1)
  local id, topic, due = ARGV[at + 1], ARGV[at + 2], ARGV[at + 4]
  if due == '' then
    due = string.format('%.3f', math.ceil((now + tonumber(ARGV[at + 6])) * 1000) / 1000)
  end
  local old = indexed and compact_take(compact, id)
  local expire_at = compacting and math.ceil(now) + tonumber(ARGV[at + 5])
  local chunk = compacting and not existed[i] and tonumber(due) >= now + compact_after
    and expire_at < 4294967296 and staging()
    and chunk_of(math.floor(tonumber(due) / WINDOW) * WINDOW)
  if chunk then
    local entry = compact_pack({expire_at = expire_at, due = due,
      delay = ARGV[at + 6], topic = topic, id = id, body = ARGV[at + 3]})
    redis.call('RPUSH', compact .. 'chunk:' .. chunk.number, entry)
    redis.call('HSET', index, id, chunk.number * CHUNK_JOBS + chunk.size)
    chunk.size = chunk.size + 1
    named[topic] = true
  else
  -- The first write is the only one Redis may refuse for want of memory: nothing is half done.
  redis.call('HSET', bucket, 'topic', topic, 'body', ARGV[at + 3], 'due', due, 'delay', ARGV[at + 6])
  if existed[i] then
    -- Pushing an id again starts it afresh: a reservation, an ended one or a death of the old job
    -- does not carry over. Its attempts are then counted afresh, so that an attempt alone no
    -- longer names one reservation (see names() in the prelude): marked, once it had one.
    if redis.call('HDEL', bucket, 'attempts', 'died_at', 'ended') > 0 or held[id] then
      redis.call('HSET', bucket, 'recounted', '1')
    end
  end
  redis.call('EXPIRE', bucket, ARGV[at + 5])
  scored[#scored + 1] = due
  scored[#scored + 1] = id
  ids[#ids + 1] = id
  named[topic] = true
  end
end
-- A batch is at most 1,000 jobs (the client's MAX_PUSH_BATCH): 2,000 arguments, within unpack's
-- limit.
if #ids > 0 then
  redis.call('ZADD', pool, unpack(scored))
  -- pcall: a registry or reservation key of the wrong type must not fail a push that is done.
  redis.pcall('ZREM', reserved, unpack(ids))
  -- And their holders (see the holders hash in keys.rs; named after the reservations key, in
  -- its slot).
  redis.pcall('HDEL', holders, unpack(ids))
end
if topics ~= '' then
  local list = {}
  for topic in pairs(named) do
    list[#list + 1] = topic
  end
  redis.pcall('SADD', topics, unpack(list))
end
if mark then
  redis.call('HSET', mark, unpack(ARGV, BASE + 2 + 6 * count))
end
return count
