-- sem_heartbeat: keep a waiter of a counting semaphore in the queue (its Client sends these
-- in batches); it also serves the queue, so a head whose turn came while no release ran (the
-- waiters before it died) is served without waiting for one.
--
-- KEYS[1] s, KEYS[2] q, KEYS[3] d, KEYS[4] g (see _sem.lua and _csem.lua)
-- KEYS[5]  optional: "<s>:b:<hold id>", set for 10s when a heartbeat collects the hold's
--          grant, so that the same heartbeat run again (go-redis re-sends a pipeline whose
--          replies a broken connection lost) answers 2 again: the record is gone by then, and
--          answering 0 would send the waiter to join anew, its granted permits never used
-- ARGV[1]  hold id
-- ARGV[2]  n, the permits it asked for
-- ARGV[3]  waiter timeout in ms
-- ARGV[4]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[5]  optional: the semaphore's expiry in ms (absent or "0": none), see keep_counting in
--          _sem.lua
--
-- Replies: 2 the permits were granted to it (the heartbeat doubles as the fallback for a lost
-- grant message); 1 still queued (live until now + timeout); 0 no longer queued (a waiter
-- whose deadline passed is not revived).
--@include _csem
local s, q, d, g = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local member = ARGV[1] .. ' ' .. ARGV[2]
local timeout = tonumber(ARGV[3])
local now = server_ms()
local c = counts(s)
if c.total and c.gated then
  serve(s, q, d, g, c, now, ARGV[4], nil)
  save(s, c)
end
local r
if KEYS[5] and redis.call('EXISTS', KEYS[5]) == 1 then
  r = 2
elseif take_grant(g, member, now) then
  if KEYS[5] then
    redis.call('SET', KEYS[5], '1', 'PX', 10000)
  end
  r = 2
else
  r = beat(q, d, member, now, timeout)
end
if c.total then
  keep_counting(ARGV[5])
end
return r
