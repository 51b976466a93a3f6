-- Compact jobs by id (see compact.rs): one read or removed, or some staged now (written in the
-- legacy form at once, whatever their window, for a caller that then works on them as on any
-- job).
--
-- KEYS[1]    the job pool
-- ARGV[1]    what the compact layout's keys start with ("delayer:compact:")
-- ARGV[2]    what every bucket key starts with ("delayer:job_bucket:")
-- ARGV[3]    "get", "remove" or "stage"
-- ARGV[4]    for "get": the longest body to read (a longer one is answered by its length)
-- ARGV[5..]  the job's id; for "stage", the jobs' ids
--
-- Returns for "get" {topic, body or its length, due, delay}, or nil when the job does not wait
-- compact; for "remove" 1, or nil; for "stage" how many of the ids waited compact.

local pool, prefix, bucket_prefix, action = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local id = ARGV[5]
if not compact_usable(prefix) then
  -- No compact job can be found (see compact_usable): none is.
  return action == 'stage' and 0 or nil
end
if action == 'get' then
  local chunk, _, entry = compact_find(prefix, id)
  local job = chunk and compact_unpack(entry)
  if not job or job.id ~= id then
    return nil
  end
  local body = #job.body > tonumber(ARGV[4]) and #job.body or job.body
  return {job.topic, body, job.due, job.delay}
end
if action == 'stage' then
  require_type(pool, 'zset')
  require_permission('ZADD', pool, '0', 'x')
  local staged = 0
  for at = 5, #ARGV do
    local id = ARGV[at]
    local bucket = bucket_prefix .. id
    -- A bucket there now is a newer job of a legacy client's: it wins (see compact_stage.lua).
    local newer = redis.call('EXISTS', bucket) == 1
    local job = compact_take(prefix, id)
    if job then
      staged = staged + 1
      if not newer then
        redis.call('HSET', bucket, 'topic', job.topic, 'body', job.body, 'due', job.due,
          'delay', job.delay)
        redis.call('EXPIREAT', bucket, job.expire_at)
        redis.call('ZADD', pool, job.due, id)
      end
    end
  end
  return staged
end
if action == 'remove' then
  return compact_take(prefix, id) and 1 or nil
end
error({err = 'ERR compact_job: unknown action ' .. tostring(action)})
