-- Reads a page of the job pool in due order: the entries after a cursor, the job a page last
-- showed (its score and id), found anew each time, so that no page re-reads those before it
-- (an offset would, at a cost that grows with the page) and jobs that move meanwhile do not
-- shift the page. Reads only.
--
-- KEYS[1]  the job pool
-- ARGV[1]  the cursor's score ("" for none: the page starts at the pool's first entry)
-- ARGV[2]  the cursor's id
-- ARGV[3]  the most entries to read (at most 1000)
--
-- Returns {id_1, score_1, id_2, score_2, ...}: the entries after the cursor, in due order (by
-- score, then by id, as Redis orders a sorted set).

local pool, score, id, most = KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[3])

-- Whether `a` comes after `b` among members of one score: Redis orders them by their bytes, a
-- prefix first. (Lua's `<` on strings follows the server's locale.)
local function after(a, b)
  for index = 1, math.min(#a, #b) do
    local x, y = string.byte(a, index), string.byte(b, index)
    if x ~= y then
      return x > y
    end
  end
  return #a > #b
end

local start = 0
if score ~= '' then
  local at = redis.call('ZSCORE', pool, id)
  if at and tonumber(at) == tonumber(score) then
    start = redis.call('ZRANK', pool, id) + 1
  else
    -- The cursor's job left the pool (moved, made due, removed): the page starts at the first
    -- entry of a greater score, or of the same score and a greater id. Those of the same score
    -- are found by halving their range, so that thousands pushed in one second (a legacy push
    -- writes whole seconds) cost a few steps.
    local low = redis.call('ZCOUNT', pool, '-inf', '(' .. score)
    local high = low + redis.call('ZCOUNT', pool, score, score)
    while low < high do
      local middle = math.floor((low + high) / 2)
      if after(redis.call('ZRANGE', pool, middle, middle)[1], id) then
        high = middle
      else
        low = middle + 1
      end
    end
    start = low
  end
end
if most < 1 then
  return {}
end
return redis.call('ZRANGE', pool, start, start + most - 1, 'WITHSCORES')
