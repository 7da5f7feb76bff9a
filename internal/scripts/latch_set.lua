-- latch_set: set a latch's count (TrySetCount), only if it is not set or is 0.
--
-- KEYS[1] the latch's count (see latch_await.lua)
-- KEYS[2] "<count key>:x:<call id>", the call's own key (see _once.lua): a second run of the
--         same call (go-redis's retry after a lost reply) answers as the first did
-- ARGV[1] the count, >= 1
-- ARGV[2] the latch's expiry in ms: the count key's TTL
--
-- Replies: {1} set; {0} a count above 0 is there, nothing changed. A key that is not a count
-- fails with WRONGTYPE.
--@include _once
local kept = replay(KEYS[2])
if kept then
  return kept
end
local v = redis.call('GET', KEYS[1])
if v then
  local n = tonumber(v)
  if not n then
    return redis.error_reply('WRONGTYPE the latch key holds a string that is not a count')
  end
  if n > 0 then
    return remember(KEYS[2], {0})
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return remember(KEYS[2], {1})
