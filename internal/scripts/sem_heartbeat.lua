-- sem_heartbeat: keep a waiter of a counting semaphore in the queue (its Client sends these
-- in batches); it also serves the queue, so a head whose turn came while no release ran (the
-- waiters before it died) is served without waiting for one.
--
-- KEYS[1] s, KEYS[2] q, KEYS[3] d, KEYS[4] g (see sem_acquire.lua)
-- ARGV[1]  hold id
-- ARGV[2]  n, the permits it asked for
-- ARGV[3]  waiter timeout in ms
-- ARGV[4]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
--
-- Replies: 2 the permits were granted to it (the heartbeat doubles as the fallback for a lost
-- grant message); 1 still queued (live until now + timeout); 0 no longer queued (a waiter
-- whose deadline passed is not revived).
--@include _sem
local s, q, d, g = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local member = ARGV[1] .. ' ' .. ARGV[2]
local timeout = tonumber(ARGV[3])
local now = server_ms()
local v = redis.call('HMGET', s, 't', 'a', 'q')
if v[1] and v[3] then
  local avail = tonumber(v[2])
  local left = dispatch(s, q, d, now, tonumber(v[1]), avail, grants_in(g, now), ARGV[4], nil)
  if left ~= avail then
    redis.call('HSET', s, 'a', left)
  end
end
if take_grant(g, member, now) then
  return 2
end
local sc = redis.call('ZSCORE', d, member)
if not sc or tonumber(sc) <= now then
  return 0 -- a dead entry stays in d until it reaches the head, so that it never revives
end
redis.call('ZADD', d, string.format('%d', now + timeout), member)
redis.call('PEXPIRE', q, 2 * timeout)
redis.call('PEXPIRE', d, 2 * timeout)
return 1
