-- Finishes jobs: ends each one's reservation and deletes it, so that it is never delivered again.
-- Only the reservation named (by id and attempt) is finished: a consumer whose reservation lapsed,
-- and whose job another consumer now holds or that was pushed again, changes nothing.
--
-- KEYS[1]  the reservations ("delayer:reserved")
-- KEYS[2]  the job pool ("delayer:job_pool")
-- KEYS[3]  the holders ("delayer:reserved:holders"): each reservation's attempt, until it ends
-- KEYS[4..]  the jobs' buckets, one a job
-- ARGV  the jobs' ids, in the order of the buckets, then the attempt each reservation was (the
--       `attempts` reserve returned), in the same order
--
-- Returns a code a job, in order: 1 when that reservation was current: the job is finished
-- (unless it had been pushed again meanwhile, when only the reservation ends and the new push
-- stands); 2 when it had lapsed and nobody reserved the job since: finished all the same; 0 when
-- it is stale (another reservation since, or pushed again): nothing changed; -1 when there is no
-- such job (one whose data was removed, or expired, while it was reserved is finished all the
-- same: 1). Each job is named once: a second ack in the same call could finish a job pushed again
-- after the first (the first ends the reservation, the second finds the job lapsed).
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

local pooled = naming(expected, scores, pool, {unpack(ARGV, 1, count)})
local holder = naming(expected, redis.call, 'HMGET', holders, unpack(ARGV, 1, count))

-- The usual ack, told from the replies above alone: the holder (which reserve writes, and whatever
-- ends the reservation forgets, writing the count back to the bucket) names this attempt (compared
-- as text, the way reserve wrote it), and the job is not in the pool. A job with a holder is
-- reserved, unless a version before the holders hash ended the reservation (which does not
-- forget the holder): then it was delivered again, and is finished all the same. Its bucket is
-- not looked at: one removed (or expired) under a reservation is finished all the same.
local codes, usual = {}, true
for index = 1, count do
  local named, attempt = holder[index], ARGV[count + index]
  if named and not pooled[index] and string.find(named, ':', 1, true) == #attempt + 1
      and string.sub(named, 1, #attempt) == attempt then
    codes[index] = 1
  else
    usual = false
  end
end
if usual then
  naming(expected, redis.call, 'ZREM', reserved, unpack(ARGV, 1, count))
  redis.call('HDEL', holders, unpack(ARGV, 1, count))
  redis.call('DEL', unpack(KEYS, 4))
  return codes
end

local unreserve, forget, unpool, delete, kept = {}, {}, {}, {}, {}
for index = 1, count do
  local bucket, id = KEYS[index + 3], ARGV[index]
  local held = true
  if not codes[index] then
    -- A job in the pool may have been pushed again while reserved (by a legacy client, which
    -- keeps the count): then only the reservation ends. A bucket of the wrong type counts as gone.
    held = naming(expected, redis.call, 'ZSCORE', reserved, id)
    require_permission('HMGET', bucket, 'topic')
    local fields = read_or_false('HMGET', bucket, 'topic', 'attempts')
    -- The attempt the job is at: its holder's; else (lapsed, or reserved by a version before the
    -- holders hash) the bucket's.
    local now = holder_of(holder[index]) or (fields and tonumber(fields[2]))
    if not (fields and fields[1]) then
      codes[index] = -1
    elseif now ~= tonumber(ARGV[count + index]) then
      codes[index] = 0
    else
      codes[index] = held and 1 or 2
      if pooled[index] and held then
        -- The count this reservation used stays with the job.
        require_permission('HSET', bucket, 'attempts', '1')
        kept[#kept + 1] = {bucket, now}
      elseif pooled[index] then
        unpool[#unpool + 1] = id
      end
    end
  end
  if codes[index] >= 1 then
    forget[#forget + 1] = id
    if held then
      unreserve[#unreserve + 1] = id
    end
    if not (pooled[index] and held) then
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
  redis.call('DEL', unpack(delete))
end
for _, keep in ipairs(kept) do
  redis.call('HSET', keep[1], 'attempts', keep[2])
end
return codes
