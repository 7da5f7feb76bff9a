-- lock_renew: extend, or only check, one hold of an exclusive lock (the watchdog's call).
--
-- KEYS[1]  lock key (see lock_acquire.lua)
-- KEYS[2]  optional: a key that lives as long as the hold, extended with it (an election's
--          leader record, elect_lead.lua)
-- ARGV[1]  hold id: fresh for every hold, so a renewal that crosses an Unlock can never
--          extend a later hold
-- ARGV[2]  lease in ms, or 0 to check that the hold is still there without extending it
--
-- Replies: 1 the hold is alive (and extended when ARGV[2] > 0); 0 it is gone.
--@include _lock_value
local v = live_value(redis.call('GET', KEYS[1]))
if not v or (v ~= ARGV[1] and string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. ' ') then
  return 0
end
if ARGV[2] ~= '0' then
  extend_lease(KEYS[1], v, tonumber(ARGV[2]))
  if KEYS[2] then
    redis.call('PEXPIRE', KEYS[2], ARGV[2])
  end
end
return 1
