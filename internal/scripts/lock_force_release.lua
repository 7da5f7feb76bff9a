-- lock_force_release: free an exclusive lock whoever holds it (administration).
--
-- KEYS[1]  lock hash (see lock_acquire.lua)
-- ARGV[1]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[2]  channel to notify
--
-- Replies: 1 if the lock was held and is now free (a waiter was notified), 0 if it was free.
-- The hash keeps t (the last token) for the rest of its TTL.
local h = KEYS[1]
if redis.call('HEXISTS', h, 'o') == 0 then
  return 0
end
redis.call('HDEL', h, 'o', 'n', 'w')
redis.call(ARGV[1], ARGV[2], '1')
return 1
