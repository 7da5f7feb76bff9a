-- lock_info: read the state of an exclusive lock in one round trip.
--
-- KEYS[1]  lock hash (see lock_acquire.lua)
--
-- Replies: {owner or false, hold count or false, last token or false, pttl}; pttl is the
-- remaining lease in ms while held, -2 when the lock is free.
local h = KEYS[1]
local cur = redis.call('HMGET', h, 'o', 'n', 't')
local pttl = -2
if cur[1] then
  pttl = redis.call('PTTL', h)
end
return {cur[1], cur[2], cur[3], pttl}
