-- lock_info: read the state of an exclusive lock in one round trip.
--
-- KEYS[1]  lock key (see lock_acquire.lua)
--
-- Replies: {hold id, hold count, token or false, pttl} while held (pttl: the remaining lease in
-- ms; the token is false until one was asked for); {false, false, false, -2} when free.
-- Error WRONGTYPE when the key holds a value aqs did not write.
--@include _lock_value
local v = live_value(redis.call('GET', KEYS[1]))
if not v then
  return {false, false, false, -2}
end
local hold, rest = parse_value(v)
local n = hold_count(rest)
local t = string.match(rest, ' t(%d+)') or false
return {hold, n, t, remaining(KEYS[1], v)}
