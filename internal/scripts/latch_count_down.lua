-- latch_count_down: count a latch down by one (CountDown). The count that reaches 0 stays, as
-- "0", until the latch's expiry, so that a later Await returns at once; the run that makes it
-- 0 publishes one "*" on the latch's channel, which wakes every waiter of every Client (the
-- channel is shared by all of them, not one per Client).
--
-- KEYS[1] the latch's count (see latch_await.lua)
-- KEYS[2] "<count key>:x:<call id>", the call's own key (see _once.lua): a second run of the
--         same call (go-redis's retry after a lost reply, or the caller's own send again)
--         answers as the first did and counts nothing down a second time
-- ARGV[1] the latch's expiry in ms: the count key's TTL, refreshed by every count-down
-- ARGV[2] publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[3] the latch's channel, "<count key>:c" (same hash slot)
--
-- Replies: {n} the count after it, n >= 0 (a count at 0 stays 0, and nothing changes: no
-- refresh, no message); {-1} no count (never set, or expired), nothing changed. A key that is
-- not a count fails with WRONGTYPE.
--@include _once
local kept = replay(KEYS[2])
if kept then
  return kept
end
local v = redis.call('GET', KEYS[1])
if not v then
  return remember(KEYS[2], {-1})
end
local n = tonumber(v)
if not n then
  return redis.error_reply('WRONGTYPE the latch key holds a string that is not a count')
end
if n <= 0 then
  return remember(KEYS[2], {0})
end
n = n - 1
redis.call('SET', KEYS[1], n, 'PX', ARGV[1])
if n == 0 then
  redis.call(ARGV[2], ARGV[3], '*')
end
return remember(KEYS[2], {n})
