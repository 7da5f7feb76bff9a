-- lock_release: count one hold of an exclusive lock down, or end the hold.
--
-- KEYS[1]  lock key (see lock_acquire.lua)
-- ARGV[1]  the value the key holds when this owner's hold has count 1 and no waiter mark:
--          "#<token> 1 0 <owner>". The common release is one comparison with it, as in the
--          minimal compare-and-delete lock.
-- ARGV[2]  "#<token>": what the key keeps after the release (the last fencing token, for the
--          rest of its TTL)
-- ARGV[3]  "1" to end the hold whatever its count (the caller's last acquisition), "0" to
--          count one down
-- ARGV[4]  publish command, used only when a waiter marked the lock: PUBLISH, or SPUBLISH on
--          Redis Cluster; the channel is KEYS[1] .. ":ch"
--
-- Replies:
--   n >= 1  holds left
--   0       released; if a waiter had marked the lock (w), "1" (wake one) was published
--   -1      the lock is not held by this owner; nothing changed
--   error   WRONGTYPE when the key holds a value aqs did not write
local k = KEYS[1]
local v = redis.call('GET', k)
if v == ARGV[1] and ARGV[3] == '1' then
  redis.call('SET', k, ARGV[2], 'KEEPTTL')
  return 0
end
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
if '#' .. t .. ' 1 0 ' .. o ~= ARGV[1] then
  return -1 -- another owner, or another hold of ours
end
n = tonumber(n)
if ARGV[3] == '0' and n > 1 then
  redis.call('SET', k, '#' .. t .. ' ' .. (n - 1) .. ' ' .. w .. ' ' .. o, 'KEEPTTL')
  return n - 1
end
redis.call('SET', k, ARGV[2], 'KEEPTTL')
if w == '1' then
  redis.call(ARGV[4], k .. ':ch', '1')
end
return 0
