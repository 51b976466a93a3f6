-- Finishes jobs: ends each one's reservation and deletes it, so that it is never delivered again.
-- Only the reservation a receipt names is finished: a consumer whose reservation lapsed, and
-- whose job another consumer holds now, or that was pushed again or requeued, changes nothing.
--
-- KEYS[1]  the reservations ("delayer:reserved")
-- KEYS[2]  the job pool ("delayer:job_pool")
-- KEYS[3]  the holders ("delayer:reserved:holders"): each reservation's "<attempt>:<token>"
-- KEYS[4..]  the jobs' buckets, one a job
-- ARGV  the jobs' ids, in the order of the buckets; then each receipt's attempt (the `attempts`
--       reserve returned); then each receipt's token (the reserve call's), "" for a receipt
--       without one (an HTTP client that sends back only the id and the attempt); then,
--       optionally, how long to keep a finished job's data, in ms ("" or absent: deleted at once),
--       and the caller's clock (unix seconds, only when this Redis user may not run TIME): a job
--       delivered to Kafka by its id keeps its data that long for consumers to read, marked
--       `delivered_at`
--
-- Returns a code a job, in order:
--    1  the reservation named was current: the job is finished; or, when a legacy client pushed
--       it again meanwhile and it waits in the pool, only the reservation ends and the push
--       stands;
--    2  the reservation named had ended (lapsed, nacked or given back) and nothing happened to
--       the job since (not reserved again, pushed again or requeued): finished all the same,
--       whether it waits for its retry or was delivered again;
--    0  stale (another reservation since, pushed again, or requeued): nothing changed;
--   -1  there is no such job (one whose data was removed, or expired, while it was reserved is
--       finished all the same: 1);
--   -2  the receipt has no token, and the job's attempts were counted afresh since its first
--       reservation (pushed again or requeued), so the attempt names more than one: nothing
--       changed.
-- Each job is named once: a second ack in the same call could take the first's end for a lapse.
--
-- The reads come first, each one command for all the jobs, then the writes, one command each
-- (ZREM, HDEL, DEL): what a job costs is a member of each, not a call.

local reserved, pool, holders = KEYS[1], KEYS[2], KEYS[3]
local count = #KEYS - 3
if count == 0 then
  return {}
end
-- Their types are proven by the reads (and the first write), and named only when one fails.
local expected = {{reserved, 'zset'}, {pool, 'zset'}, {holders, 'hash'}}
require_permission('ZREM', reserved, 'id')
require_permission('ZREM', pool, 'id')
require_permission('HDEL', holders, 'id')
require_permission('DEL', unpack(KEYS, 4))

local ids = {unpack(ARGV, 1, count)}
local keep_ms = tonumber(ARGV[3 * count + 1] or '')
if keep_ms and keep_ms < 1 then
  keep_ms = nil
end
if keep_ms then
  require_permission('PEXPIRE', KEYS[4], '1')
end
-- Read before any write (Redis before 5 takes TIME only then).
local now = keep_ms and decimal(clock(ARGV[3 * count + 2] or ''))

-- Finished jobs' data: deleted, or kept `keep_ms` marked delivered.
local function finish(buckets)
  if not keep_ms then
    redis.call('DEL', unpack(buckets))
    return
  end
  for _, bucket in ipairs(buckets) do
    redis.call('HSET', bucket, 'delivered_at', now)
    redis.call('PEXPIRE', bucket, keep_ms)
  end
end
local pooled = naming(expected, scores, pool, ids)
local holder = naming(expected, redis.call, 'HMGET', holders, unpack(ids))

-- The usual ack, told from the replies above alone: the receipt's token names the holder (which
-- reserve writes, and whatever ends the reservation forgets), and the job is not in the pool. A
-- job with a holder is reserved, unless a version before the holders hash ended the reservation
-- (which does not forget the holder): then it was delivered again, and is finished all the
-- same. Its bucket is not looked at: one removed (or expired) under a reservation is finished
-- all the same.
local codes, usual = {}, true
for index = 1, count do
  local token = ARGV[2 * count + index]
  if token ~= '' and not pooled[index] and holder[index] == ARGV[count + index] .. ':' .. token then
    codes[index] = 1
  else
    usual = false
  end
end
if usual then
  naming(expected, redis.call, 'ZREM', reserved, unpack(ids))
  redis.call('HDEL', holders, unpack(ids))
  finish({unpack(KEYS, 4)})
  return codes
end

local unreserve, forget, unpool, delete, kept = {}, {}, {}, {}, {}
for index = 1, count do
  local bucket, id = KEYS[index + 3], ids[index]
  local attempt, token = ARGV[count + index], ARGV[2 * count + index]
  local held = true
  if not codes[index] then
    held = naming(expected, redis.call, 'ZSCORE', reserved, id)
    require_permission('HMGET', bucket, 'topic')
    -- A bucket of the wrong type counts as gone.
    local fields = read_or_false('HMGET', bucket, 'topic', 'attempts', 'ended', 'recounted',
      'reserved_by')
    local recounted = fields and fields[4]
    if not (fields and fields[1]) then
      codes[index] = -1
    elseif token == '' and recounted then
      codes[index] = -2
    elseif holder[index] then
      -- Reserved now; or ended by a version before the holders hash, which left the holder and
      -- delivered the job again: finished all the same.
      codes[index] = names(holder[index], attempt, token, recounted) and (held and 1 or 2) or 0
    elseif held then
      -- Reserved by a version before the holders hash.
      codes[index] = names_by_bucket(fields[2], fields[5], attempt, token, recounted) and 1 or 0
    elseif pooled[index] and whole_seconds(pooled[index]) then
      -- Pushed again by a legacy client since the reservation ended: the push stands.
      codes[index] = 0
    else
      -- Ended, and waiting for its retry or delivered again: `ended` names the reservation,
      -- until a push or requeue since forgets it (the move forgets it for a legacy push).
      codes[index] = names(fields[3], attempt, token, recounted) and 2 or 0
    end
    if codes[index] == 1 and pooled[index] then
      -- Pushed again by a legacy client while reserved: the count this reservation used stays
      -- with the job, and no ended reservation names the new push.
      require_permission('HSET', bucket, 'attempts', '1')
      require_permission('HDEL', bucket, 'ended')
      kept[#kept + 1] = {bucket, holder_of(holder[index]) or tonumber(fields[2])}
    end
  end
  if codes[index] >= 1 then
    forget[#forget + 1] = id
    if held then
      unreserve[#unreserve + 1] = id
    end
    if not (pooled[index] and held) then
      if pooled[index] then
        unpool[#unpool + 1] = id
      end
      delete[#delete + 1] = bucket
    end
  end
end

if #unreserve > 0 then
  redis.call('ZREM', reserved, unpack(unreserve))
end
if #forget > 0 then
  redis.call('HDEL', holders, unpack(forget))
end
if #unpool > 0 then
  redis.call('ZREM', pool, unpack(unpool))
end
if #delete > 0 then
  finish(delete)
end
for _, keep in ipairs(kept) do
  redis.call('HSET', keep[1], 'attempts', keep[2])
  redis.call('HDEL', keep[1], 'ended')
end
return codes
