-- elect_leader: read an election's leader (package election).
--
-- KEYS[1]  lock key: the fair lock of the election's name (see lock_acquire.lua)
-- KEYS[2]  the election's leader record (see elect_lead.lua)
--
-- Replies: {hold id, token, revision, value} while a hold of the lock leads; false when none
-- does (the lock is free, or its holder has not begun to lead). Error WRONGTYPE when the lock
-- key holds a value aqs did not write.
--@include _lock_value
local v = live_value(redis.call('GET', KEYS[1]))
if not v then
  return false
end
local hold = parse_value(v)
local rec = redis.call('HMGET', KEYS[2], 'h', 't', 'r', 'v')
if rec[1] ~= hold then
  return false
end
return rec
