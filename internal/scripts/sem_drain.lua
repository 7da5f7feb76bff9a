-- sem_drain: take every permit available now from a counting semaphore.
--
-- KEYS[1] s (see _sem.lua)
--
-- Replies: the permits taken (0 when never set).
local a = tonumber(redis.call('HGET', KEYS[1], 'a'))
if not a or a == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'a', 0)
return a
