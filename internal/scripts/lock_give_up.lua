-- lock_give_up: a waiter stops waiting (its context ended, or its wait bound), or an attempt
-- whose outcome is unknown is undone: whatever the hold has is given up.
--
-- KEYS[1]  lock key l, KEYS[2] queue list q, KEYS[3] deadline zset d (see _lock.lua)
-- ARGV[1]  hold id
-- ARGV[2]  lease in ms it asked for (with ARGV[1], its queue member)
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
--
-- The waiter leaves the queue. If the lock is this hold's (handed over in the same instant,
-- the grant message still on its way, or taken by an attempt whose reply was lost), the lock
-- passes on to the next live waiter at once: nothing is left behind and no wakeup is lost.
-- When the waiter was the live head of the queue of a free lock (the lock was kept for it),
-- the lock goes to the next live waiter at once, which would otherwise wait for this one's
-- deadline.
--
-- Replies: 1 it was queued (and live) and left; 2 it had the lock, which passed on; 0 neither.
--@include _lock
local l, q, d = KEYS[1], KEYS[2], KEYS[3]
local member = ARGV[1] .. ' ' .. ARGV[2]
local now = server_ms()
local s = redis.call('ZSCORE', d, member)
local v = live_value(redis.call('GET', l), now)
if s then
  local head = not v and live_head(q, d, now) == member
  redis.call('ZREM', d, member)
  if head then
    hand_off(l, q, d, now, ARGV[3])
  end
  if tonumber(s) > now then
    return 1
  end
  return 0
end
if v and parse_value(v) == ARGV[1] then
  hand_off(l, q, d, now, ARGV[3])
  return 2
end
return 0
