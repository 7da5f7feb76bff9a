-- lock_info: read the state of an exclusive lock in one round trip.
--
-- KEYS[1]  lock key (see lock_acquire.lua)
--
-- Replies: {owner or false, hold count or false, last token or false, pttl}; pttl is the
-- remaining lease in ms while held, -2 when the lock is free. Error WRONGTYPE when the key
-- holds a value aqs did not write.
local v = redis.call('GET', KEYS[1])
if not v then
  return {false, false, false, -2}
end
local t, n, w, o = string.match(v, '^#(%d+) (%d+) (%d) (.+)$')
if t then
  return {o, n, t, redis.call('PTTL', KEYS[1])}
end
t = string.match(v, '^#(%d+)$')
if not t then
  return redis.error_reply('WRONGTYPE the lock key holds a value aqs did not write')
end
return {false, false, t, -2}
