-- lock_heartbeat: keep a waiter alive in the queue (its Client sends these in batches).
--
-- KEYS[1]  lock key l, KEYS[2] queue list q, KEYS[3] deadline zset d (see _lock.lua)
-- ARGV[1]  hold id
-- ARGV[2]  lease in ms it asked for (with ARGV[1], its queue member)
-- ARGV[3]  waiter timeout in ms
--
-- Replies (the statuses of every heartbeat script; internal/scripts decodes them in
-- DecodeBeat): 1 still queued (its deadline is now + timeout); 2 the lock is this hold's:
-- handed to it (the heartbeat doubles as the fallback for a lost grant message), or it was
-- the live head of a free lock and took it (granted as by a release: see grant in _lock.lua);
-- 0 it is no longer queued (a waiter whose deadline passed is dropped, not revived).
--@include _lock
local l, q, d = KEYS[1], KEYS[2], KEYS[3]
local timeout = tonumber(ARGV[3])
local member = ARGV[1] .. ' ' .. ARGV[2]
local s = redis.call('ZSCORE', d, member)
local now = server_ms()
local v = live_value(redis.call('GET', l), now)
if s then
  if tonumber(s) <= now then
    redis.call('ZREM', d, member) -- dead already: it is not revived
    return 0
  end
  redis.call('ZADD', d, now + timeout, member)
  keep_queue(q, d, timeout)
  local e = v and lease_end(v)
  if e and redis.call('PTTL', l) < e - now + timeout then
    redis.call('PEXPIRE', l, e - now + 2 * timeout) -- the key outlives the lease while we wait
  end
  if not v and live_head(q, d, now) == member then
    -- The lock is free and kept for this waiter (the holder's lease ran out, or a waiter it
    -- was handed to died): take it now rather than at the waiter's next attempt.
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
