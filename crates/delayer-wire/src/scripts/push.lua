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
-- ARGV[3..]  six a job, in the order of KEYS:
--              id, topic, body;
--              when it falls due, in unix seconds (fractional), for a job pushed for a time; ""
--              for one pushed with a delay: due the delay after now, by Redis's clock, to the
--              millisecond and rounded up;
--              the bucket's time to live in seconds (the delay plus the ready lifetime, as the
--              legacy clients set it);
--              the delay it was pushed with, in seconds (for those who ask how it was pushed)
-- ARGV[3+6n..] optional, after the n jobs: a hash, then field-value pairs set in it with the jobs
--            (a mark of what was pushed, written in the same call, so that a producer that must
--            push each thing once never has the one without the other). Not a declared key: one
--            Redis only (the client sets the mark apart in the cluster layout)
--
-- Returns how many jobs it wrote (all of them), or an error naming the job's key that holds the
-- wrong type, whose time to live is out of range, or that this Redis user may not write.

local pool, reserved, topics = KEYS[1], KEYS[2], ARGV[1]
local count = #KEYS - 2
local marked = #ARGV - 2 - 6 * count
if marked ~= 0 and (marked < 3 or marked % 2 == 0) then
  error({err = 'ERR push wants six arguments a job, then optionally a hash and field-value pairs'})
end
local mark = marked > 0 and ARGV[3 + 6 * count]

require_type(pool, 'zset')
if mark then
  require_type(mark, 'hash')
  require_permission('HSET', mark, 'f', 'v')
end
require_permission('ZADD', pool, '0', ARGV[3])
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
  local bucket, at = KEYS[2 + i], 2 + 6 * (i - 1)
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

-- Read before the first write (Redis before 5 allows writes after TIME only when asked first).
local now = by_delay and clock(ARGV[2])
-- Which of the ids pushed again are reserved now (pcall: a holders key of the wrong type must not
-- fail a push).
local holders, held = reserved .. ':holders', {}
local again = {}
for i = 1, count do
  if existed[i] then
    again[#again + 1] = ARGV[2 + 6 * (i - 1) + 1]
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
for i = 1, count do
  local bucket, at = KEYS[2 + i], 2 + 6 * (i - 1)
  local id, topic, due = ARGV[at + 1], ARGV[at + 2], ARGV[at + 4]
  if due == '' then
    due = string.format('%.3f', math.ceil((now + tonumber(ARGV[at + 6])) * 1000) / 1000)
  end
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
-- A batch is at most 1,000 jobs (the client's MAX_PUSH_BATCH): 2,000 arguments, within unpack's
-- limit.
redis.call('ZADD', pool, unpack(scored))
-- pcall: a registry or reservation key of the wrong type must not fail a push that is done.
redis.pcall('ZREM', reserved, unpack(ids))
-- And their holders (see the holders hash in keys.rs; named after the reservations key, in its
-- slot).
redis.pcall('HDEL', holders, unpack(ids))
if topics ~= '' then
  local list = {}
  for topic in pairs(named) do
    list[#list + 1] = topic
  end
  redis.pcall('SADD', topics, unpack(list))
end
if mark then
  redis.call('HSET', mark, unpack(ARGV, 4 + 6 * count))
end
return count
