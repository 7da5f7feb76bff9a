-- elect_proclaim: change the leader's value without losing leadership (package election).
--
-- KEYS[1]  lock key: the fair lock of the election's name (see lock_acquire.lua)
-- KEYS[2]  the election's leader record and channel (see elect_lead.lua)
-- ARGV[1]  hold id
-- ARGV[2]  the new value
-- ARGV[3]  publish command, PUBLISH or SPUBLISH (Redis Cluster)
--
-- Replies: the record's new revision when the hold leads; 0 when it no longer does (the lock
-- is not its, or it never led). Error WRONGTYPE when the lock key holds a value aqs did not
-- write.
--@include _lock_value
local k, e, hold = KEYS[1], KEYS[2], ARGV[1]
local v = live_value(redis.call('GET', k))
if not v or parse_value(v) ~= hold then
  return 0
end
local rec = redis.call('HMGET', e, 'h', 't')
if rec[1] ~= hold then
  return 0
end
local r = redis.call('HINCRBY', e, 'r', 1)
redis.call('HSET', e, 'v', ARGV[2])
redis.call(ARGV[3], e, rec[2] .. ' ' .. r .. ' ' .. hold .. ' ' .. ARGV[2])
return r
