-- Adds counts to the history (see history.rs), for the daemon's moves, deliveries again and dead
-- jobs, and, in the cluster layout, for the clients' pushes and acks (elsewhere the push and ack
-- scripts count their own). Best effort: see count_history in the prelude.
--
-- KEYS[1]    the history's prefix ("delayer:{history}"): never written itself; it names the slot
--            of the minute's keys, which start with it
-- ARGV[1]    the unix minute the counts are of; "" for now, by Redis's clock
-- ARGV[2]    the caller's clock, unix seconds: now, only when this Redis user may not run TIME
-- ARGV[3]    the most topics a minute counts apart
-- ARGV[4]    how long a minute's keys live after it ends, seconds
-- ARGV[5..]  three a count: topic, field, how many
--
-- Returns 1 when it wrote, 0 when it did not (this Redis user may not, or the minute is older
-- than its keys live).

local now = clock(ARGV[2])
local minute = ARGV[1] == '' and math.floor(now / 60) or tonumber(ARGV[1])
local counts = {}
for at = 5, #ARGV, 3 do
  counts[#counts + 1] = {ARGV[at], ARGV[at + 1], tonumber(ARGV[at + 2])}
end
return count_history(KEYS[1], ARGV[3], ARGV[4], minute, now, counts) and 1 or 0
