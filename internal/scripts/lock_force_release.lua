-- lock_force_release: free an exclusive lock whoever holds it (administration).
--
-- KEYS[1]  lock key (see lock_acquire.lua)
-- ARGV[1]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[2]  channel to notify
--
-- Replies: 1 if the lock was held and is now free (a waiter was notified), 0 if it was free;
-- error WRONGTYPE when the key holds a value aqs did not write.
-- The key keeps the last token for the rest of its TTL.
local k = KEYS[1]
local v = redis.call('GET', k)
if not v then
  return 0
end
local t = string.match(v, '^#(%d+) %d+ %d .+$')
if not t then
  if string.match(v, '^#%d+$') then
    return 0
  end
  return redis.error_reply('WRONGTYPE the lock key holds a value aqs did not write')
end
redis.call('SET', k, '#' .. t, 'KEEPTTL')
redis.call(ARGV[1], ARGV[2], '1')
return 1
