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
-- On the lock's queue: as lock_heartbeat.lua.
local s = redis.call('ZSCORE', d, member)
local v = live_value(redis.call('GET', l), now)
if s then
  if tonumber(s) <= now then
    redis.call('ZREM', d, member)
    return 0
  end
  redis.call('ZADD', d, now + timeout, member)
  keep_queue(q, d, timeout)
  local e = v and lease_end(v)
  if e and redis.call('PTTL', l) < e - now + timeout then
    redis.call('PEXPIRE', l, e - now + 2 * timeout)
  end
  if not v and live_head(q, d, now) == member then
    redis.call('LPOP', q)
    redis.call('ZREM', d, member)
    grant(l, member, now + timeout, now)
    return 2
  end
  return 1
end
if v and owns(v, ARGV[1]) then
  return 2
end
return 0
