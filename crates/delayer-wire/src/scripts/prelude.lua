-- Helpers prepended to every delayer script (each script file starts after them).
--
-- The rule they serve: a script must fail, if it fails at all, before its first write. Redis runs
-- a script to the end or stops it at the first error, and keeps the writes made until then, so a
-- write refused half-way leaves a job both moved and waiting (twice delivered) or neither (lost).
-- Out-of-memory refusals come only on a script's first write; what else can refuse a write later
-- (a key of the wrong type, an ACL that denies the key) is checked up front with these.

-- Fails the script when `key` holds a type other than `expected` (a missing key is fine).
local function require_type(key, expected)
  local kind = redis.call('TYPE', key).ok
  if kind ~= 'none' and kind ~= expected then
    error({err = 'WRONGTYPE ' .. key .. ' holds a ' .. kind .. ', not a ' .. expected})
  end
end

-- Runs `command` (a function, with its arguments), and when it fails, fails naming the key of the
-- wrong type among `expected` ({key, type} pairs) if one is, else with the command's own error. For
-- a script's reads and first write: a TYPE a key is paid only when something failed.
local function naming(expected, command, ...)
  local ok, reply = pcall(command, ...)
  if not ok then
    for _, key in ipairs(expected) do
      require_type(key[1], key[2])
    end
    error(reply)
  end
  return reply
end

-- Whether this connection's Redis user may run `command` with these arguments (ACL). Redis 6 has
-- no way to ask from a script: there, permissions are as the operator set them.
local function may(command, ...)
  if redis.acl_check_cmd == nil then
    return true
  end
  return redis.acl_check_cmd(command, ...)
end

-- Fails the script unless this Redis user may run `command` with these arguments.
local function require_permission(command, key, ...)
  if not may(command, key, ...) then
    error({err = 'NOPERM this Redis user may not run ' .. command .. ' on ' .. key})
  end
end

-- A job's attempt count as every script reads it: a whole number from 0 to 2^31 - 2. Anything
-- else (missing, negative, fractional, inf, nan) counts as 0, so that no script takes a count as
-- used up that another takes as none.
local function attempts_of(value)
  local attempts = tonumber(value)
  if attempts == nil or attempts ~= attempts or attempts < 0 or attempts >= 2147483647
      or attempts ~= math.floor(attempts) then
    return 0
  end
  return attempts
end

-- Now by Redis's clock, in unix seconds, and true; or `fallback` (the caller's clock) and false when
-- this Redis user may not run TIME. One clock for every host: a daemon or a consumer whose clock is
-- off must not move a job early, end a reservation early, or push a job off its delay.
local function clock(fallback)
  -- Asked first where Redis can say: a refused call would be logged (ACL LOG) at every script.
  if not may('TIME') then
    return tonumber(fallback), false
  end
  if redis.replicate_commands then
    -- Redis before 5: a script may write after TIME only when its effects are what replicates.
    redis.replicate_commands()
  end
  local time = redis.pcall('TIME')
  if type(time) ~= 'table' or time.err then
    return tonumber(fallback), false
  end
  return tonumber(time[1]) + tonumber(time[2]) / 1000000, true
end

-- `seconds` as Redis is given it: six decimals (a plain Lua number would go as 14 digits, 0.1 ms
-- at today's unix times).
local function decimal(seconds)
  return string.format('%.6f', seconds)
end

-- Whole unix milliseconds, rounded up (a deadline is never early), as Redis is given them.
local function milliseconds_up(seconds)
  return string.format('%.0f', math.ceil(seconds * 1000))
end

-- Runs a read whose only expected failure is a key of the wrong type: returns false for that
-- (the caller treats the key as not holding a job), and fails the script on any other error (no
-- permission, a key on another cluster node), which must never pass for "no job".
local function read_or_false(...)
  local reply = redis.pcall(...)
  if type(reply) == 'table' and reply.err then
    if string.sub(reply.err, 1, 9) == 'WRONGTYPE' then
      return false
    end
    error(reply)
  end
  return reply
end


-- The scores of `members` in sorted set `key`, in order (false for one not there): one ZMSCORE
-- (Redis 6.2+) where this Redis has it and this user may run it, else one ZSCORE a member.
local function scores(key, members)
  if #members < 2 then
    return {members[1] and redis.call('ZSCORE', key, members[1])}
  end
  if may('ZMSCORE', key, members[1]) then
    local reply = redis.pcall('ZMSCORE', key, unpack(members))
    if not reply.err then
      return reply
    end
    -- Only an older Redis's "unknown command" falls back; anything else is the script's error.
    if not string.find(string.lower(reply.err), 'unknown') then
      error(reply)
    end
  end
  local found = {}
  for index, member in ipairs(members) do
    found[index] = redis.call('ZSCORE', key, member)
  end
  return found
end

-- A reservation's holder as the holders hash records it ("<attempt>:<token>"): the attempt, a
-- whole number, and the token of the reserve call; nil for none (a reservation made by a version
-- before the holders hash, whose attempt is the bucket's `attempts`).
local function holder_of(value)
  if not value then
    return nil, nil
  end
  local colon = string.find(value, ':', 1, true)
  local attempt = colon and tonumber(string.sub(value, 1, colon - 1))
  if not attempt then
    return nil, nil
  end
  return attempt, string.sub(value, colon + 1)
end

-- A job's body for a reply: the body; its length in bytes (a number) when that is over `most`;
-- false when the bucket (a hash) has none. Copied into the script only when short enough.
local function body_up_to(bucket, most)
  local size = redis.call('HSTRLEN', bucket, 'body')
  if size > most then
    return size
  end
  if size == 0 and redis.call('HEXISTS', bucket, 'body') == 0 then
    return false
  end
  return redis.call('HGET', bucket, 'body')
end

-- Whether `score` (of the job pool) is a whole number of seconds: the due time of a legacy client's
-- push, which writes whole seconds only, where a retry of ours has a fraction (barring one time
-- in a million, which then counts as a push: the safe side wherever this is asked).
local function whole_seconds(score)
  local seconds = tonumber(score)
  return seconds ~= nil and seconds == math.floor(seconds)
end

-- Whether a receipt (its `attempt`, and its `token`: "" for a receipt without one) names the
-- reservation `holder` ("<attempt>:<token>", as the holders hash and a bucket's `ended` record
-- one). A token names one reservation. An attempt alone names it only while the job's attempts
-- were never counted afresh (`recounted`, the bucket's field: pushed again or requeued after a
-- reservation), since otherwise two reservations of the job share that attempt.
local function names(holder, attempt, token, recounted)
  if not holder then
    return false
  end
  if token ~= '' then
    return holder == attempt .. ':' .. token
  end
  return not recounted and holder_of(holder) == tonumber(attempt)
end

-- The same for a reservation made by a version before the holders hash: its attempt is the
-- bucket's `attempts`, and its token the bucket's `reserved_by`.
local function names_by_bucket(attempts, reserved_by, attempt, token, recounted)
  if tonumber(attempts) ~= tonumber(attempt) then
    return false
  end
  if token ~= '' then
    return reserved_by == token
  end
  return not recounted
end

-- The compact layout (compact.rs): a job packed into one entry of a chunk (a list), found by id
-- through the index. `place` is chunk * CHUNK_JOBS + position, as the index holds it. The same
-- numbers as compact.rs's (a test there checks).
local CHUNK_JOBS = 1000
-- Seconds: the span of due times a chunk holds; how long a daemon's beat says it stages.
local WINDOW = 64
local BEAT_FRESH = 30

-- A compact job's entry: its due time and delay as its push wrote them (the bucket's `due` and
-- `delay`), when its data expires (unix seconds), topic, id and body; lengths first, so that any
-- bytes fit.
local function compact_pack(job)
  return struct.pack('>I4BBI4I4', job.expire_at, #job.due, #job.delay, #job.topic, #job.id)
    .. job.due .. job.delay .. job.topic .. job.id .. job.body
end

local function compact_unpack(entry)
  local expire_at, due, delay, topic, id, at = struct.unpack('>I4BBI4I4', entry)
  -- One table made whole, with no loop: a table a field, and a table grown field by field, made
  -- staging a fifth dearer (callgrind).
  local sub = string.sub
  local due_at, delay_at, topic_at, id_at = at, at + due, at + due + delay, at + due + delay + topic
  return {expire_at = expire_at, due = sub(entry, due_at, delay_at - 1),
    delay = sub(entry, delay_at, topic_at - 1), topic = sub(entry, topic_at, id_at - 1),
    id = sub(entry, id_at, id_at + id - 1), body = sub(entry, id_at + id)}
end

-- Whether this Redis user may find, read and take compact jobs under `prefix` (an ACL written
-- before the layout may not: its jobs are then all legacy ones).
-- An index or a set of chunks of another type (written by hand) also makes the layout unusable:
-- pushes then write the legacy form, and the daemon's staging names the key.
local function compact_usable(prefix)
  local index, chunk = prefix .. 'index', prefix .. 'chunk:1'
  local function holds(key, kind)
    local found = redis.call('TYPE', key).ok
    return found == 'none' or found == kind
  end
  return prefix ~= '' and may('HGET', index, 'f') and may('HDEL', index, 'f')
    and may('EXISTS', index) and may('LINDEX', chunk, '0') and may('LSET', chunk, '0', '')
    and may('TYPE', index) and holds(index, 'hash') and holds(prefix .. 'chunks', 'zset')
end

-- Where job `id` waits compact under `prefix`: its chunk's key, its position there (from 0) and
-- its entry; nil when it does not (nil and true when the index names a place that holds no job).
-- Callers ask compact_usable once a call, first (not once a job).
local function compact_find(prefix, id)
  local place = tonumber(redis.call('HGET', prefix .. 'index', id))
  if not place then
    return nil
  end
  local chunk = prefix .. 'chunk:' .. math.floor(place / CHUNK_JOBS)
  local position = place % CHUNK_JOBS
  -- A chunk key of another type (written by hand) holds no job of ours.
  local entry = read_or_false('LINDEX', chunk, position)
  if not entry or entry == '' then
    return nil, true
  end
  return chunk, position, entry
end

-- Takes job `id` out of the compact layout (its entry emptied, so that the others keep their
-- places, and the index forgets it); returns its fields, or nil when it did not wait compact.
local function compact_take(prefix, id)
  local chunk, position, entry = compact_find(prefix, id)
  if not chunk then
    if position then
      -- An index entry whose chunk key another client wrote over: forgotten.
      redis.call('HDEL', prefix .. 'index', id)
    end
    return nil
  end
  local job = compact_unpack(entry)
  redis.call('HDEL', prefix .. 'index', id)
  if job.id ~= id then
    -- Not its entry (cannot happen but by hand): the index alone was wrong.
    return nil
  end
  redis.call('LSET', chunk, position, '')
  return job
end
