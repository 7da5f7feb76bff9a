-- lock_force_release: free an exclusive lock whoever holds it (administration), or whatever
-- hold one owner has (undoing an acquisition whose reply was lost).
--
-- KEYS[1]  lock key (see lock_acquire.lua)
-- ARGV[1]  publish command: PUBLISH, or SPUBLISH on Redis Cluster; the channel is
--          KEYS[1] .. ":ch"
-- ARGV[2]  owner id, or "" for any owner
--
-- Replies: 1 if the lock was held and is now free (a waiter was notified), 0 if it was free;
-- error WRONGTYPE when the key holds a value aqs did not write. The key keeps the last token
-- for the rest of its TTL.
local k = KEYS[1]
local v = redis.call('GET', k)
if not v then
  return 0
end
local t, o = string.match(v, '^#(%d+) %d+ %d (.+)$')
if not t then
  if string.match(v, '^#%d+$') then
    return 0
  end
  return redis.error_reply('WRONGTYPE the lock key holds a value aqs did not write')
end
if ARGV[2] ~= '' and o ~= ARGV[2] then
  return 0
end
redis.call('SET', k, '#' .. t, 'KEEPTTL')
redis.call(ARGV[1], k .. ':ch', '1')
return 1
