-- One compact job by id (see compact.rs): read, removed, or staged now (written in the legacy
-- form at once, whatever its window, for a caller that then works on it as on any job).
--
-- KEYS[1]    the job pool
-- ARGV[1]    what the compact layout's keys start with ("delayer:compact:")
-- ARGV[2]    what every bucket key starts with ("delayer:job_bucket:")
-- ARGV[3]    the job's id
-- ARGV[4]    "get", "remove" or "stage"
-- ARGV[5]    for "get": the longest body to read (a longer one is answered by its length)
--
-- Returns nil when the job does not wait compact; else for "get" {topic, body or its length,
-- due, delay}, for "remove" and "stage" 1.

local pool, prefix, bucket_prefix, id, action = KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if action == 'get' then
  local chunk, _, entry = compact_find(prefix, id)
  local job = chunk and compact_unpack(entry)
  if not job or job.id ~= id then
    return nil
  end
  local body = #job.body > tonumber(ARGV[5]) and #job.body or job.body
  return {job.topic, body, job.due, job.delay}
end
if action == 'stage' then
  require_type(pool, 'zset')
  require_permission('ZADD', pool, '0', id)
  local bucket = bucket_prefix .. id
  -- A bucket there now is a newer job of a legacy client's: it wins (see compact_stage.lua).
  if redis.call('EXISTS', bucket) == 1 then
    return compact_take(prefix, id) and 1 or nil
  end
  local job = compact_take(prefix, id)
  if not job then
    return nil
  end
  redis.call('HSET', bucket, 'topic', job.topic, 'body', job.body, 'due', job.due,
    'delay', job.delay)
  redis.call('EXPIREAT', bucket, job.expire_at)
  redis.call('ZADD', pool, job.due, id)
  return 1
end
if action == 'remove' then
  return compact_take(prefix, id) and 1 or nil
end
error({err = 'ERR compact_job: unknown action ' .. tostring(action)})
