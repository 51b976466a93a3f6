-- Ends reservations: each job goes back to the pool to be delivered again, or, once it has been
-- reserved max_attempts times, onto its topic's dead list. One script for its three callers: the
-- daemon ending the reservations whose deadline passed, a consumer giving a job back after a
-- failure (nack), and a worker that stops giving back a job it could not finish.
--
-- KEYS[1]  the reservations ("delayer:reserved")
-- KEYS[2]  the job pool ("delayer:job_pool")
-- KEYS[3]  the holders ("delayer:reserved:holders"): each reservation's attempt; a reservation
--          without an entry (made before the holders hash) has the bucket's `attempts`. Ending
--          one writes its attempt count back to the bucket.
-- ARGV[1]  the caller's clock, unix seconds: now, only when this Redis user may not run TIME
-- ARGV[2]  how long after now to deliver the jobs again, in seconds
-- ARGV[3]  max attempts: a job already reserved this many times is dead instead
-- ARGV[4]  the job bucket key prefix ("delayer:job_bucket:")
-- ARGV[5]  the dead list key prefix ("delayer:dead_queue:"); a topic's dead list is
--          ARGV[5] .. topic .. ARGV[11]
-- ARGV[6]  the most reservations to end in this call
-- ARGV[7]  the registry of topics ("delayer:topics", or "" for none): a topic with a dead job is added (not a
--          declared key: it is optional, and a user's ACL may leave it out)
-- ARGV[8]  what to release: "lapsed" (those whose deadline is <= now), "nack" (one reservation,
--          the attempt counted) or "give_back" (one reservation, the attempt not counted and never
--          dead: the job was not really tried)
-- ARGV[9], ARGV[10]  with "nack" and "give_back": the id, and the receipt's attempt; a
--          reservation the receipt does not name (lapsed, or another since) is left alone ("" with
--          "lapsed")
-- ARGV[11] the dead list key suffix ("" in the legacy layout)
-- ARGV[12] the topic of every job here, whatever its bucket says (the cluster layout's); "" else
-- ARGV[13] with "nack": how long, in seconds, a job's data must outlive its new due time (the
--          legacy clients' ready_max_lifetime): a bucket that would expire before is given that
--          long, so that a retry far off does not find the job's data gone
-- ARGV[14] with "nack" and "give_back": the receipt's token (the reserve call's); "" for a
--          receipt without one, which names the reservation by its attempt alone (see ack.lua)
-- ARGV[15] why a job goes dead, written to its bucket's `died_why` ("" for none: the field is
--          removed, so that a reason from an earlier death is not told again). A job that can
--          never be delivered (Kafka refuses it) is nacked with max attempts 1 and a reason.
--
-- Ending a reservation writes its attempt count back to the bucket's `attempts`, and, when the
-- job goes back to the pool or dead by this call, its holder to `ended`: the receipt of the
-- reservation that ended, by which a late ack finishes the job (ack.lua).
--
-- Returns {ended, next_deadline, retried, dead, dropped, blocked, ambiguous}:
--   ended          how many reservations this call ended; == ARGV[6]: more may have expired
--   next_deadline  the earliest deadline still ahead (unix milliseconds), or "" when there is none
--   retried        {topic, id, ...} pairs: back in the pool, due ARGV[2] after now
--   dead           {topic, id, ...} pairs: on their topic's dead list
--   dropped        ids whose bucket is gone: only their reservation ended
--   blocked        {topic, id, ...} pairs that should be dead, but whose topic's dead list key holds
--                  something other than a list (or may not be written by this Redis user): back in
--                  the pool instead, never lost
--   ambiguous      1 when the receipt (of a "nack" or "give_back") has no token and the job's
--                  attempts were counted afresh since its first reservation: nothing changed; else 0
-- A job pushed again while it was reserved (it is in the pool already) keeps its new due time.

local reserved, pool, holders, registry = KEYS[1], KEYS[2], KEYS[3], ARGV[7]
local max_attempts = tonumber(ARGV[3])
local bucket_prefix, dead_prefix, limit, mode = ARGV[4], ARGV[5], tonumber(ARGV[6]), ARGV[8]

-- Checked before the first write: the ZADD that puts a job back must not fail after its ZREM.
require_type(reserved, 'zset')
require_type(pool, 'zset')
require_type(holders, 'hash')
require_permission('ZREM', reserved, 'id')
require_permission('HDEL', holders, 'id')
require_permission('ZADD', pool, '0', 'id')
require_permission('HMGET', bucket_prefix .. 'id', 'topic')
require_permission('HSET', bucket_prefix .. 'id', 'died_at', '0')
require_permission('HINCRBY', bucket_prefix .. 'id', 'attempts', '-1')
require_permission('HDEL', bucket_prefix .. 'id', 'ended')
if mode == 'nack' then
  require_permission('PTTL', bucket_prefix .. 'id')
  require_permission('PEXPIRE', bucket_prefix .. 'id', '1')
end
local seconds = clock(ARGV[1])
local now, retry_at = decimal(seconds), decimal(seconds + tonumber(ARGV[2]))

local ids, ambiguous = {}, 0
if mode == 'lapsed' then
  -- Deadlines are whole milliseconds.
  ids = redis.call('ZRANGEBYSCORE', reserved, '-inf', string.format('%.0f', math.floor(seconds * 1000)),
    'LIMIT', 0, limit)
elseif redis.call('ZSCORE', reserved, ARGV[9]) then
  local id, attempt, token = ARGV[9], ARGV[10], ARGV[14]
  local holder = redis.call('HGET', holders, id)
  -- The bucket only when the holder alone cannot tell (see touch.lua).
  local fields = (token == '' or not holder)
    and read_or_false('HMGET', bucket_prefix .. id, 'attempts', 'recounted', 'reserved_by')
  local recounted = fields and fields[2]
  local current
  if token == '' and recounted then
    ambiguous = 1
  elseif holder then
    current = names(holder, attempt, token, recounted)
  else
    current = fields and names_by_bucket(fields[1], fields[3], attempt, token, recounted)
  end
  ids = current and {id} or {}
end

local retried, dead, dropped, blocked = {}, {}, {}, {}
for _, id in ipairs(ids) do
  local bucket = bucket_prefix .. id
  -- Reads first (they may fail the script), then the writes. A bucket of the wrong type counts
  -- as gone.
  local fields = read_or_false('HMGET', bucket, 'topic', 'attempts')
  local topic = fields and fields[1]
  if topic and ARGV[12] ~= '' then
    topic = ARGV[12]
  end
  -- The attempt this reservation is: the holders'; or, made before the holders hash, the
  -- bucket's (which then holds it already).
  local holder = redis.call('HGET', holders, id)
  local held_as = holder_of(holder)
  local attempts = topic and (held_as or attempts_of(fields[2])) or 0
  local pushed_again = redis.call('ZSCORE', pool, id)
  local out_of_attempts = mode ~= 'give_back' and attempts >= max_attempts and not pushed_again
  local dead_list = topic and dead_prefix .. topic .. ARGV[11]
  local dead_kind = out_of_attempts and dead_list and redis.call('TYPE', dead_list).ok
  -- A nack far off: the data must outlive the new due time by ARGV[13] (read before any write).
  local keep_for
  if mode == 'nack' and topic then
    local needed = math.ceil((tonumber(ARGV[2]) + tonumber(ARGV[13])) * 1000)
    local left = redis.call('PTTL', bucket)
    if left >= 0 and left < needed then
      keep_for = needed
    end
  end
  redis.call('ZREM', reserved, id)
  redis.call('HDEL', holders, id)
  if topic and held_as then
    -- The count goes back to the bucket; one given back untried does not count.
    local counted = attempts
    if mode == 'give_back' and counted > 0 then
      counted = counted - 1
    end
    if pushed_again then
      -- The push stands: no receipt of the old job may finish it.
      redis.call('HSET', bucket, 'attempts', counted)
      redis.call('HDEL', bucket, 'ended')
    else
      redis.call('HSET', bucket, 'attempts', counted, 'ended', holder)
    end
  end
  if not topic then
    dropped[#dropped + 1] = id
  elseif pushed_again then
    retried[#retried + 1] = topic
    retried[#retried + 1] = id
  elseif dead_kind and (dead_kind ~= 'list' and dead_kind ~= 'none' or not may('LPUSH', dead_list, id)) then
    -- Its dead list cannot take it: delivered again rather than lost.
    if keep_for then
      redis.call('PEXPIRE', bucket, keep_for)
    end
    redis.call('ZADD', pool, retry_at, id)
    blocked[#blocked + 1] = topic
    blocked[#blocked + 1] = id
  elseif out_of_attempts then
    redis.call('LPUSH', dead_list, id)
    redis.call('HSET', bucket, 'died_at', now)
    if ARGV[15] ~= '' then
      redis.call('HSET', bucket, 'died_why', ARGV[15])
    else
      redis.call('HDEL', bucket, 'died_why')
    end
    -- pcall: the registry only helps to list topics; it must never stop a release.
    if registry ~= '' then
      redis.pcall('SADD', registry, topic)
    end
    dead[#dead + 1] = topic
    dead[#dead + 1] = id
  else
    if mode == 'give_back' and attempts > 0 and not held_as then
      redis.call('HINCRBY', bucket, 'attempts', -1)
    end
    if keep_for then
      redis.call('PEXPIRE', bucket, keep_for)
    end
    redis.call('ZADD', pool, retry_at, id)
    retried[#retried + 1] = topic
    retried[#retried + 1] = id
  end
end

local next_deadline = ''
local upcoming = redis.call('ZRANGE', reserved, 0, 0, 'WITHSCORES')
if upcoming[2] then
  next_deadline = upcoming[2]
end
return {#ids, next_deadline, retried, dead, dropped, blocked, ambiguous}
