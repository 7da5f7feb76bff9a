-- lock_reenter: re-enter a hold of an exclusive lock that the caller believes it has.
--
-- KEYS[1]  lock key (see lock_acquire.lua)
-- ARGV[1]  hold id
-- ARGV[2]  lease in ms: 0 leaves the expiry alone, > 0 extends the lease to at least this (a
--          re-entry never shortens a lease)
--
-- Replies: 1 when re-entered; 0 when the key no longer holds this hold (it was lost; nothing
-- changed). Error WRONGTYPE when the key holds a value aqs did not write.
--@include _lock_value
local k = KEYS[1]
local v = live_value(redis.call('GET', k))
if not v then
  return 0
end
local hold, rest = parse_value(v)
if hold ~= ARGV[1] then
  return 0
end
local value = with_count(hold, rest, hold_count(rest) + 1)
local lease = tonumber(ARGV[2])
redis.call('SET', k, value, 'KEEPTTL')
if lease > 0 and remaining(k, value) < lease then
  extend_lease(k, value, lease)
end
return 1
