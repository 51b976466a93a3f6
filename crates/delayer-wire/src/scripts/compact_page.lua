-- Reads the jobs waiting compact (see compact.rs) in due order, after a cursor, as
-- pool_page.lua reads the pool: so that a page of waiting jobs holds both, merged. A chunk
-- holds its window's jobs in push order, so every chunk of a window is read before any of its
-- jobs is given; windows are read in order until the page is full and the next window starts
-- after its last job, or until about ARGV[6] entries were read (only between windows). Reads
-- only.
--
-- KEYS[1]  the chunks (declared so that a cluster sends the call to their slot)
-- ARGV[1]  what the compact layout's keys start with ("delayer:compact:")
-- ARGV[2]  the cursor's score ("" for none: from the first job)
-- ARGV[3]  the cursor's id
-- ARGV[4]  the most jobs to give
-- ARGV[5]  only this topic's jobs ("" for every topic's)
-- ARGV[6]  about the most entries to read
--
-- Returns {resume, read, id_1, due_1, topic_1, id_2, ...}: `read` the entries read; `resume`
-- "" when no job waits compact after those given, else where jobs may follow: the last job's
-- score when the page is full, or the start of the first window not read when the read stopped
-- first (the next read starts there).

local prefix, score, id, most, topic, budget =
  ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[6])
local chunks = prefix .. 'chunks'
local cursor = tonumber(score)

-- Whether `a` comes before `b` in Redis's order of members of one score (their bytes).
local function before(a, b)
  for at = 1, math.min(#a, #b) do
    local x, y = string.byte(a, at), string.byte(b, at)
    if x ~= y then
      return x < y
    end
  end
  return #a < #b
end

local function earlier(a, b)
  if a.score ~= b.score then
    return a.score < b.score
  end
  return before(a.id, b.id)
end

-- None, or another type (written by hand; the daemon's staging names it): no compact job to give.
if redis.call('TYPE', chunks).ok ~= 'zset' then
  return {'', '0'}
end
local found, read, bound, stopped, truncated = {}, 0, nil, false, false
local from = cursor and math.floor(cursor / WINDOW) * WINDOW or '-inf'
local offset, current = 0, nil
while not stopped do
  local listed = redis.call('ZRANGEBYSCORE', chunks, from, '+inf', 'WITHSCORES', 'LIMIT', offset, 16)
  if #listed == 0 then
    break
  end
  offset = offset + #listed / 2
  for at = 1, #listed, 2 do
    local window = tonumber(listed[at + 1])
    if window ~= current then
      -- A new window: stop when the page is full and this window starts after its last job, or
      -- when enough was read.
      if (bound and window > bound) or read >= budget then
        stopped = window
        break
      end
      current = window
    end
    -- A chunk key of another type (written by hand) holds no job of ours: staging forgets it.
    local entries = read_or_false('LRANGE', prefix .. 'chunk:' .. listed[at], 0, -1) or {}
    read = read + #entries
    for _, entry in ipairs(entries) do
      if entry ~= '' then
        local job = compact_unpack(entry)
        job.score = tonumber(job.due)
        if (topic == '' or job.topic == topic) and (not cursor or job.score > cursor
            or (job.score == cursor and before(id, job.id))) then
          found[#found + 1] = job
        end
      end
    end
    if #found >= most then
      table.sort(found, earlier)
      for drop = #found, most + 1, -1 do
        found[drop] = nil
        truncated = true
      end
      bound = found[most].score
    end
  end
end
table.sort(found, earlier)
local resume = ''
if #found >= most and (stopped or truncated) then
  resume = found[most].due
elseif stopped then
  resume = tostring(stopped)
end
local reply = {resume, tostring(read)}
for at = 1, math.min(#found, most) do
  local job = found[at]
  reply[#reply + 1] = job.id
  reply[#reply + 1] = job.due
  reply[#reply + 1] = job.topic
end
return reply
