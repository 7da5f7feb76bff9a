-- sem_try: take n permits of a counting semaphore if nobody waits and they are there; change
-- nothing otherwise. The uncontended acquisition, with one key and one argument, so that the
-- server does the least work for it (the caller falls back to sem_acquire.lua on 0).
--
-- KEYS[1] s (see _sem.lua and _csem.lua)
-- ARGV[1] n (> 0)
--
-- Replies: 1 acquired; 0 not (nothing changed).
local v = redis.call('HMGET', KEYS[1], 'a', 'q')
local n = tonumber(ARGV[1])
if v[2] == false and v[1] and tonumber(v[1]) >= n then
  redis.call('HINCRBY', KEYS[1], 'a', -n)
  return 1
end
return 0
