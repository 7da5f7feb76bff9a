-- lock_release: count one hold of an exclusive lock down, or end the hold.
--
-- KEYS[1]  lock key (see lock_acquire.lua)
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
--   error   WRONGTYPE when the key holds a value aqs did not write
--
-- The key keeps the last token ("#<token>") for the rest of its TTL.
local k = KEYS[1]
local v = redis.call('GET', k)
if not v then
  return -1
end
local t, n, w, o = string.match(v, '^#(%d+) (%d+) (%d) (.+)$')
if not t then
  if string.match(v, '^#%d+$') then
    return -1
  end
  return redis.error_reply('WRONGTYPE the lock key holds a value aqs did not write')
end
if o ~= ARGV[1] then
  return -1
end
n = tonumber(n)
if ARGV[2] == '0' and n > 1 then
  redis.call('SET', k, '#' .. t .. ' ' .. (n - 1) .. ' ' .. w .. ' ' .. o, 'KEEPTTL')
  return n - 1
end
redis.call('SET', k, '#' .. t, 'KEEPTTL')
if w == '1' then
  redis.call(ARGV[3], ARGV[4], '1')
end
return 0
