-- lsem_heartbeat: keep a waiter of a leased-permit semaphore in the queue (its Client sends
-- these in batches); it also serves the queue, so that permits whose lease ran out go to the
-- waiters without waiting for a release.
--
-- KEYS[1] s, KEYS[2] q, KEYS[3] d, KEYS[4] p, KEYS[5] pn (see _lsem.lua)
-- ARGV[1]  hold id
-- ARGV[2]  n, the permits it asked for
-- ARGV[3]  the lease it asked for, in ms
-- ARGV[4]  waiter timeout in ms
-- ARGV[5]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[6]  optional: the semaphore's expiry in ms (absent or "0": none), see keep_leased in
--          _sem.lua
--
-- Replies: 2 its permit was granted (the heartbeat doubles as the fallback for a lost grant
-- message); 1 still queued (live until now + timeout); 0 no longer queued (a waiter whose
-- deadline passed is not revived).
--@include _lsem
local s, q, d, p, pn = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local hold = ARGV[1]
local member = hold .. ' ' .. ARGV[2] .. ' ' .. ARGV[3]
local timeout = tonumber(ARGV[4])
local now = server_ms()
local v = redis.call('HMGET', s, 't', 'q')
if v[1] and v[2] then
  local total = tonumber(v[1])
  dispatch(s, q, d, now, total, total - in_use(s, p, pn, now), permits_in(s, p, pn, now), ARGV[5], nil)
end
local r
local e = redis.call('ZSCORE', p, hold)
if e and tonumber(e) > now then
  r = 2
else
  r = beat(q, d, member, now, timeout)
end
if v[1] then
  keep_leased(ARGV[6])
end
return r
