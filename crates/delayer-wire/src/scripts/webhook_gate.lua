-- A webhook's flow control over every daemon: hands out the right to start requests, so that no
-- more than `most` are in flight at once and starts are spaced `spacing` ms apart (a rate), by
-- Redis's clock. A request in flight holds a lease until its caller gives it back, or until the
-- lease ends (a daemon killed mid-request). Starts are handed out up to `ahead` ms before their
-- time, each with its time: the caller waits for it, so that one call serves many requests.
--
-- KEYS[1]  the leases: sorted set of lease -> its end, unix ms ("delayer:webhook:{NAME}:in_flight")
-- KEYS[2]  the next start free, unix ms (string, "delayer:webhook:{NAME}:rate")
-- ARGV[1]  how many leases are asked for (the names follow ARGV[7])
-- ARGV[2]  the most in flight; 0: no limit
-- ARGV[3]  the least ms between two starts, a decimal (0.2 for 5000 a second); 0: no rate
-- ARGV[4]  how far ahead a start may be handed out, ms
-- ARGV[5]  how long a lease lasts after its start, ms
-- ARGV[6]  the caller's clock, unix seconds: now, only when this Redis user may not run TIME
-- ARGV[7..6+n]  the names of the leases asked for, in order (unique to the caller)
-- ARGV[7+n..]  the names of leases given back (their requests ended)
--
-- Returns {granted, first}: the first `granted` names asked for are leases now, the ith (from 0)
-- to start `first + i * spacing` ms from now (`first` in whole microseconds).

local leases, rate = KEYS[1], KEYS[2]
local wanted, most, spacing = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local ahead, lasting = tonumber(ARGV[4]), tonumber(ARGV[5])
require_type(leases, 'zset')
require_type(rate, 'string')
require_permission('ZADD', leases, '0', 'x')
require_permission('SET', rate, '0')
local now = clock(ARGV[6]) * 1000
local given_back = 7 + wanted
if #ARGV >= given_back then
  redis.call('ZREM', leases, unpack(ARGV, given_back))
end
local granted = wanted
if most > 0 then
  redis.call('ZREMRANGEBYSCORE', leases, '-inf', now)
  local free = most - redis.call('ZCARD', leases)
  if free < granted then
    granted = math.max(free, 0)
  end
end
local first = 0
if spacing > 0 and granted > 0 then
  local next_free = tonumber(redis.call('GET', rate)) or now
  if next_free < now then
    next_free = now
  end
  local fit = math.floor((now + ahead - next_free) / spacing) + 1
  if fit < granted then
    granted = math.max(fit, 0)
  end
  if granted > 0 then
    local after = next_free + granted * spacing
    redis.call('SET', rate, string.format('%.3f', after), 'PX', math.ceil(after - now) + 1000)
  end
  first = next_free - now
end
for i = 1, granted do
  local ends = now + first + (i - 1) * spacing + lasting
  redis.call('ZADD', leases, string.format('%.3f', ends), ARGV[6 + i])
end
return {granted, math.floor(first * 1000)}
