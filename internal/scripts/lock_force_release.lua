-- lock_force_release: free an exclusive lock whoever holds it (administration), or only if a
-- given hold has it, and hand it to the live head of the queue.
--
-- KEYS[1]  lock key l, KEYS[2] queue list q, KEYS[3] deadline zset d (see _lock.lua)
-- ARGV[1]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[2]  hold id, or "" for any hold
--
-- Replies: 1 the lock was held (by that hold) and passed on or was freed; 0 otherwise. Error
-- WRONGTYPE when the key holds a value aqs did not write.
--@include _lock
local l, q, d = KEYS[1], KEYS[2], KEYS[3]
local v = live_value(redis.call('GET', l))
if not v then
  return 0
end
local hold = parse_value(v)
if ARGV[2] ~= '' and hold ~= ARGV[2] then
  return 0
end
hand_off(l, q, d, server_ms(), ARGV[1])
return 1
