-- fair_release: count one hold of a fair lock down, or end it and hand the lock to the live
-- head of the queue.
--
-- KEYS[1]  lock key, KEYS[2] queue list, KEYS[3] deadline zset (see fair_acquire.lua)
-- ARGV[1]  hold id
-- ARGV[2]  "1" to end the hold whatever its count, "0" to count one down
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
--
-- Replies: n >= 1 holds left; 0 released (handed to the next live waiter, whose Client alone
-- is notified, or freed); -1 the key does not hold this hold, nothing changed.
--@include _fair_queue
local l, q, d = KEYS[1], KEYS[2], KEYS[3]
local v = redis.call('GET', l)
if v == ARGV[1] and ARGV[2] == '1' then
  redis.call('DEL', l) -- no w: nobody waits
  return 0
end
local now = now_ms()
v = live_value(v, now)
if not v then
  return -1
end
if parse_value(v) ~= ARGV[1] then
  return -1
end
local rest = string.sub(v, #ARGV[1] + 1)
local n = hold_count(rest)
if ARGV[2] == '0' and n > 1 then
  redis.call('SET', l, with_count(ARGV[1], rest, n - 1), 'KEEPTTL')
  return n - 1
end
hand_off(l, q, d, now, ARGV[3])
return 0
