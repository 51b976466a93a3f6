-- The least a move can be, the drain's yardstick: ZRANGEBYSCORE, HGET topic a job, LPUSH a topic,
-- ZREM; no checks, no marks, no bookkeeping, nothing returned but a count.
--
-- KEYS[1]  the job pool ("delayer:job_pool")
-- ARGV[1]  now, unix seconds
-- ARGV[2]  the most ids to take in this call (the batch size, at most 7,000: one unpack each)
-- ARGV[3]  the job bucket key prefix ("delayer:job_bucket:")
-- ARGV[4]  the ready list key prefix ("delayer:ready_queue:")
--
-- Returns {taken}: how many due ids this call moved (== ARGV[2]: more may be due).

local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local topics, ids_by_topic = {}, {}
for _, id in ipairs(due) do
  local topic = redis.call('HGET', ARGV[3] .. id, 'topic')
  local ids = ids_by_topic[topic]
  if not ids then
    ids = {}
    ids_by_topic[topic] = ids
    topics[#topics + 1] = topic
  end
  ids[#ids + 1] = id
end
for _, topic in ipairs(topics) do
  redis.call('LPUSH', ARGV[4] .. topic, unpack(ids_by_topic[topic]))
end
if #due > 0 then
  redis.call('ZREM', KEYS[1], unpack(due))
end
return {#due}
