-- sem_try: take n permits of a counting semaphore if nobody waits and they are there; change
-- nothing otherwise. The uncontended acquisition, with one key and one argument, so that the
-- server does the least work for it (the caller falls back to sem_acquire.lua on 0).
--
-- KEYS[1] s (see _sem.lua and _csem.lua)
-- KEYS[2] optional: "<s>:a:<call id>", a key of this call's own (see sem_release.lua), set
--         for 10s to what the run did: a run that finds it is the same call again, and answers
--         that ("x" or "r": the caller gave up on it, see sem_unsure.lua: it takes nothing)
-- ARGV[1] n (> 0)
-- ARGV[2] optional: the semaphore's expiry in ms (absent or "0": none), see keep_hash in
--         _sem.lua
--
-- Replies: 1 acquired; 0 not (nothing changed).
--@include _sem
local once = KEYS[2]
if once then
  local prev = redis.call('SET', once, '1', 'NX', 'GET', 'PX', 10000)
  if prev then
    return tonumber(prev) or 0
  end
end
local v = redis.call('HMGET', KEYS[1], 'a', 'q')
local n = tonumber(ARGV[1])
if v[2] == false and v[1] and tonumber(v[1]) >= n then
  redis.call('HINCRBY', KEYS[1], 'a', -n)
  --@inline keep_hash(ARGV[2])
  return 1
end
if once then
  redis.call('SET', once, '0', 'PX', 10000) -- nothing taken, and a run again takes nothing
end
return 0
