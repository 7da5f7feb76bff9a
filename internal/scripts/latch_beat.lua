-- latch_beat: the heartbeat of a latch's waiter (its Client sends these in batches): the
-- fallback for a wake message that was lost. It writes nothing: the waiter is not recorded in
-- Redis.
--
-- KEYS[1] the latch's count (see latch_await.lua)
--
-- Replies (DecodeBeat): 2 the count is 0 (what the waiter waits for); 1 above 0; 0 no count
-- (never set, or expired: the waiter's next attempt reports it not set). A key that is not a
-- count fails with WRONGTYPE.
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
local n = tonumber(v)
if not n then
  return redis.error_reply('WRONGTYPE the latch key holds a string that is not a count')
end
if n <= 0 then
  return 2
end
return 1
