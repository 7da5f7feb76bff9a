-- lock_force_release: free an exclusive lock whoever holds it (administration), or only if a
-- given hold has it (undoing an acquisition whose reply was lost).
--
-- KEYS[1]  lock key (see lock_acquire.lua)
-- ARGV[1]  publish command: PUBLISH, or SPUBLISH on Redis Cluster; the channel is
--          KEYS[1] .. ":ch"
-- ARGV[2]  hold id, or "" for any hold
--
-- Replies: 1 if the lock was held (by that hold) and is now free, and a waiter was notified;
-- 0 otherwise. Error WRONGTYPE when the key holds a value aqs did not write.
--@include _lock_value
local k = KEYS[1]
local v = redis.call('GET', k)
if not v then
  return 0
end
local hold = parse_value(v)
if ARGV[2] ~= '' and hold ~= ARGV[2] then
  return 0
end
redis.call('DEL', k)
redis.call(ARGV[1], k .. ':ch', '1')
return 1
