-- Stages compact jobs (see compact.rs): writes each job of the chunks whose window starts within
-- the lead in the legacy form, a bucket {topic, body, due, delay} expiring when its push said and
-- an entry of the job pool, as the push script would have written it; then takes them off their
-- chunk (its last entries first), deleting it once empty.
-- From there on the mover moves it as any job, to the millisecond. A job whose id has a bucket
-- now was pushed again by a legacy client since: that newer job stays, the compact one is
-- dropped. A job whose data expired meanwhile (daemons were down longer than its lifetime) is
-- dropped, as its bucket would have expired.
--
-- KEYS[1]    the job pool
-- ARGV[1]    what the compact layout's keys start with ("delayer:compact:")
-- ARGV[2]    what every bucket key starts with ("delayer:job_bucket:")
-- ARGV[3]    the lead, in seconds: chunks whose window starts before now + lead are staged;
--            "all" for every chunk (going back to the legacy layout)
-- ARGV[4]    the most entries to read: a chunk's last entries first, so that those left keep the
--            places the index holds (a chunk is deleted once none is left)
-- ARGV[5]    the caller's clock, unix seconds: now, only when this Redis user may not run TIME
--
-- A chunk key of another type (written by hand over one of ours, whose jobs are then gone) is
-- taken out of the chunks, left as it is, and named in the reply: the other chunks are staged.
--
-- Returns {jobs staged, jobs dropped because their data expired, jobs dropped because a legacy
-- client pushed their id again, 1 if chunks within the lead are left else 0, the start of the
-- earliest window of the chunks left (unix seconds) or "" when none is, {key, type} of each
-- chunk key of another type}: a caller that stages many sets (the cluster layout) looks again
-- only as that window comes near.

local pool, prefix, bucket_prefix = KEYS[1], ARGV[1], ARGV[2]
local budget = tonumber(ARGV[4])
local index, chunks, open = prefix .. 'index', prefix .. 'chunks', prefix .. 'open'
require_type(pool, 'zset')
require_type(index, 'hash')
require_type(chunks, 'zset')
require_type(open, 'hash')
require_permission('ZADD', pool, '0', 'x')
-- Every other command, before the first write (see the prelude): a daemon that may not stage
-- fails here, and never tells pushers it stages.
local chunk_1, bucket_x = prefix .. 'chunk:1', bucket_prefix .. 'x'
require_permission('LRANGE', chunk_1, '0', '-1')
require_permission('LLEN', chunk_1)
require_permission('LTRIM', chunk_1, '0', '-1')
require_permission('DEL', chunk_1)
require_permission('ZREM', chunks, '1')
require_permission('HDEL', open, '0')
require_permission('HGET', open, '0')
require_permission('HDEL', index, 'x')
require_permission('EXISTS', bucket_x)
require_permission('HSET', bucket_x, 'f', 'v')
require_permission('EXPIREAT', bucket_x, '1')
local now = clock(ARGV[5])
local until_window = ARGV[3] == 'all' and '+inf' or '(' .. (now + tonumber(ARGV[3]))
local due = redis.call('ZRANGEBYSCORE', chunks, '-inf', until_window, 'WITHSCORES', 'LIMIT', 0, 64)
local staged, expired, replaced, read = 0, 0, 0, 0
local scored, foreign = {}, {}
-- Takes chunk `number` of `window` out of the chunks (its key is deleted or not ours).
local function forget(number, window)
  redis.call('ZREM', chunks, number)
  if redis.call('HGET', open, window) == number then
    redis.call('HDEL', open, window)
  end
end
local at = 1
while at < #due and read < budget do
  local number, window = due[at], due[at + 1]
  local chunk = prefix .. 'chunk:' .. number
  local length = redis.pcall('LLEN', chunk)
  if type(length) == 'table' then
    if string.sub(length.err or '', 1, 9) ~= 'WRONGTYPE' then
      error(length)
    end
    foreign[#foreign + 1] = {chunk, redis.call('TYPE', chunk).ok}
    forget(number, window)
    length = 0
  end
  local taken = math.min(length, budget - read)
  local entries = taken == 0 and {} or redis.call('LRANGE', chunk, length - taken, -1)
  read = read + taken
  -- A job removed or pushed again has an empty entry (see compact_take): every other entry is
  -- a job waiting here, whose index entry points here.
  local jobs, ids, buckets = {}, {}, {}
  for _, entry in ipairs(entries) do
    if entry ~= '' then
      local job = compact_unpack(entry)
      jobs[#jobs + 1] = job
      ids[#ids + 1] = job.id
      buckets[#buckets + 1] = bucket_prefix .. job.id
    end
  end
  -- Whether any of their buckets exists, in one command (the usual answer: none).
  local any = #buckets > 0 and redis.call('EXISTS', unpack(buckets)) > 0
  for n, job in ipairs(jobs) do
    local bucket = buckets[n]
    if job.expire_at <= now then
      expired = expired + 1
    elseif any and redis.call('EXISTS', bucket) == 1 then
      replaced = replaced + 1
    else
      redis.call('HSET', bucket, 'topic', job.topic, 'body', job.body, 'due', job.due,
        'delay', job.delay)
      redis.call('EXPIREAT', bucket, job.expire_at)
      scored[#scored + 1] = job.due
      scored[#scored + 1] = job.id
      staged = staged + 1
      if #scored >= 2000 then
        redis.call('ZADD', pool, unpack(scored))
        scored = {}
      end
    end
  end
  for from = 1, #ids, 1000 do
    redis.call('HDEL', index, unpack(ids, from, math.min(from + 999, #ids)))
  end
  if taken < length then
    redis.call('LTRIM', chunk, 0, length - taken - 1)
    break
  end
  if #foreign == 0 or foreign[#foreign][1] ~= chunk then
    redis.call('DEL', chunk)
    forget(number, window)
  end
  at = at + 2
end
if #scored > 0 then
  redis.call('ZADD', pool, unpack(scored))
end
-- Chunks are left when one was staged in part, some were not read, or the read stopped at its
-- limit.
local more = at < #due or #due >= 128
local first = redis.call('ZRANGEBYSCORE', chunks, '-inf', '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
return {staged, expired, replaced, more and 1 or 0, first[2] and tonumber(first[2]) or '', foreign}
