-- cond_beat: keep a Condition's waiter alive, on the condition while it waits for a Signal,
-- then on the lock's queue (its Client sends these in batches).
--
-- KEYS[1]  lock key l, KEYS[2] queue list q, KEYS[3] deadline zset d (see _lock.lua)
-- KEYS[4]  the condition's list cq, KEYS[5] its deadline zset cd (see cond_wait.lua)
-- ARGV[1]  hold id
-- ARGV[2]  lease in ms it asked for (with ARGV[1], its member)
-- ARGV[3]  waiter timeout in ms
--
-- Replies: as lock_heartbeat.lua's (1 still waiting, 2 the lock is this hold's, 0 no longer
-- queued), whether it waits on the condition or on the lock's queue.
--@include _lock
local l, q, d, cq, cd = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local timeout = tonumber(ARGV[3])
local member = ARGV[1] .. ' ' .. ARGV[2]
local now = server_ms()
local c = redis.call('ZSCORE', cd, member)
if c then
  if join(cq, cd, member, now, timeout, false) then
    return 1
  end
  return 0
end
return beat_waiter(l, q, d, ARGV[1], member, timeout, now) -- on the lock's queue
