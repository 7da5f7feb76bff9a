-- fair_give_up: a waiter stops waiting (its context ended, or its wait bound).
--
-- KEYS[1]  lock key, KEYS[2] queue list, KEYS[3] deadline zset (see fair_acquire.lua)
-- ARGV[1]  hold id
-- ARGV[2]  lease in ms it asked for (with ARGV[1], its queue member)
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
--
-- The waiter leaves the queue. If the lock was handed to it in the same instant (the grant
-- message still on its way), the lock passes on to the next live waiter at once: nothing is
-- left behind and no wakeup is lost.
--
-- Replies: 1 it was queued and left; 2 it had been handed the lock, which passed on; 0 neither.
--@include _fair_queue
local l, q, d = KEYS[1], KEYS[2], KEYS[3]
if redis.call('ZREM', d, ARGV[1] .. ' ' .. ARGV[2]) == 1 then
  return 1
end
local v = redis.call('GET', l)
if v and holder_of(v) == ARGV[1] then
  hand_off(l, q, d, now_ms(), ARGV[3])
  return 2
end
return 0
