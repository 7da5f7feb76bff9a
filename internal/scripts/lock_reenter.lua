-- lock_reenter: re-enter a hold of an exclusive lock that the caller believes it has.
--
-- KEYS[1]  lock key (see lock_acquire.lua)
-- ARGV[1]  owner id
-- ARGV[2]  the hold's fencing token
-- ARGV[3]  lease in ms: 0 leaves the expiry alone, > 0 extends the lease to at least this (a
--          re-entry never shortens a lease)
--
-- Replies: the token (>= 1) when re-entered; 0 when this owner no longer holds the lock with
-- that token (the hold was lost; nothing changed). Error WRONGTYPE when the key holds a value
-- aqs did not write.
local k = KEYS[1]
local v = redis.call('GET', k)
if not v then
  return 0
end
local t, n, w, o = string.match(v, '^#(%d+) (%d+) (%d) (.+)$')
if not t then
  if string.match(v, '^#%d+$') then
    return 0
  end
  return redis.error_reply('WRONGTYPE the lock key holds a value aqs did not write')
end
if o ~= ARGV[1] or t ~= ARGV[2] then
  return 0
end
local held = '#' .. t .. ' ' .. (tonumber(n) + 1) .. ' ' .. w .. ' ' .. o
local lease = tonumber(ARGV[3])
if lease > 0 and redis.call('PTTL', k) < lease then
  redis.call('SET', k, held, 'PX', lease)
else
  redis.call('SET', k, held, 'KEEPTTL')
end
return tonumber(t)
