-- Reads a job's body when it is no longer than a limit, so that a server answering for jobs holds
-- no body of any size a client wrote.
--
-- KEYS[1]  the job's bucket
-- ARGV[1]  the longest body to read, in bytes
--
-- Returns the body; its length in bytes (a number) when it is longer than ARGV[1]; nil when the
-- bucket has none (or is not a hash).

if read_or_false('TYPE', KEYS[1]).ok ~= 'hash' then
  return nil
end
return body_up_to(KEYS[1], tonumber(ARGV[1])) or nil
