-- lock_release: count one hold of an exclusive lock down, or end the hold.
--
-- KEYS[1]  lock hash (see lock_acquire.lua)
-- ARGV[1]  owner id
-- ARGV[2]  "1" to end the hold whatever its count (the caller's last acquisition), "0" to
--          count one down
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[4]  channel to notify when the lock becomes free
--
-- Replies:
--   n >= 1  holds left
--   0       released; if a waiter had marked the lock (w), "1" (wake one) was published
--   -1      the lock is not held by this owner; nothing changed
--
-- The hash keeps t (the last token) for the rest of its TTL.
local h = KEYS[1]
local cur = redis.call('HMGET', h, 'o', 'w')
if cur[1] ~= ARGV[1] then
  return -1
end
if ARGV[2] == '0' then
  local n = redis.call('HINCRBY', h, 'n', -1)
  if n > 0 then
    return n
  end
end
redis.call('HDEL', h, 'o', 'n', 'w')
if cur[2] then
  redis.call(ARGV[3], ARGV[4], '1')
end
return 0
