-- sem_unsure: settle a counting acquisition attempt whose reply was lost for good (see unsure
-- in semaphore/counting.go), by its key of its own.
--
-- KEYS[1]  "<s>:a:<call id>", the attempt's key (see sem_try.lua and sem_acquire.lua): absent
--          when the attempt has not run (yet), else the status it recorded
--
-- Replies: 1 the attempt took permits, or was granted them (status 1 or 2): the caller gives
-- them back; 0 it took none (it queued its hold, refused, or never ran). Either way the key is
-- left for 10s, "r" or "x", so that the attempt, should it still arrive (a copy delayed in the
-- network, after the caller gave up on it), takes nothing; and this script run again answers
-- the same.
local v = redis.call('GET', KEYS[1])
if v == '1' or v == '2' or v == 'r' then
  redis.call('SET', KEYS[1], 'r', 'PX', 10000)
  return 1
end
redis.call('SET', KEYS[1], 'x', 'PX', 10000)
return 0
