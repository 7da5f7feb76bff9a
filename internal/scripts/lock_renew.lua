-- lock_renew: extend, or only check, one hold of an exclusive lock (the watchdog's call).
--
-- KEYS[1]  lock key (see lock_acquire.lua)
-- ARGV[1]  owner id
-- ARGV[2]  fencing token of the hold: a renewal meant for an earlier hold of the same owner
--          can never extend a later one
-- ARGV[3]  lease in ms, or 0 to check that the hold is still there without extending it
--
-- Replies: 1 the hold is alive (and extended when ARGV[3] > 0); 0 it is gone.
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
local t, o = string.match(v, '^#(%d+) %d+ %d (.+)$')
if o ~= ARGV[1] or t ~= ARGV[2] then
  return 0
end
if ARGV[3] ~= '0' then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return 1
