-- rw_info: read the state of a read-write lock in one round trip.
--
-- KEYS[1] w, KEYS[2] r, KEYS[3] d (see _rw.lua)
--
-- Replies: {writer hold id or false, its hold count or false, its token or false, its
-- remaining lease in ms or -2, live readers, live waiters in the queue}. Counting them is
-- O(log N). Error WRONGTYPE when w holds a value aqs did not write.
--@include _rw
local w, r, d = KEYS[1], KEYS[2], KEYS[3]
local now = server_ms()
local readers = redis.call('ZCOUNT', r, '(' .. now, '+inf')
local waiters = redis.call('ZCOUNT', d, '(' .. now, '+inf')
local v = redis.call('GET', w)
if not v then
  return {false, false, false, -2, readers, waiters}
end
local hold, rest = parse_value(v)
local t = string.match(rest, ' t(%d+)') or false
return {hold, hold_count(rest), t, redis.call('PTTL', w), readers, waiters}
