-- latch_await: one attempt of a latch's Await: it succeeds when the count is 0. A latch's
-- waiters are not recorded in Redis (a waiter holds nothing and nothing is handed to it), so
-- this script writes nothing.
--
-- KEYS[1] the latch's count: a string holding a decimal integer >= 0, expiring after the
--         latch's expiry (set by latch_set, refreshed by latch_count_down)
-- ARGV[1] "1": the caller waits (Queued while the count is above 0); "0": it does not (Busy)
--
-- Replies (DecodeAttempt): {1, 0} Acquired: the count is 0; {3, ms} Queued or {4, ms} Busy:
-- the count is above 0, ms its remaining time to live (at least 1), after which the waiter
-- looks again and finds the latch not set, 0 when the key has no TTL; {6, 0} NotSet: no count.
-- A key that is not a count fails with WRONGTYPE, as a key of another type does.
local v = redis.call('GET', KEYS[1])
if not v then
  return {6, 0}
end
local n = tonumber(v)
if not n then
  return redis.error_reply('WRONGTYPE the latch key holds a string that is not a count')
end
if n <= 0 then
  return {1, 0}
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  ttl = 0
elseif ttl == 0 then
  ttl = 1 -- less than 1ms left: still a bound, not "nothing runs out"
end
if ARGV[1] == '1' then
  return {3, ttl}
end
return {4, ttl}
