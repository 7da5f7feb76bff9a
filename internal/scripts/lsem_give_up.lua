-- lsem_give_up: a waiter of a leased-permit semaphore stops waiting (its context ended, or its
-- wait bound); a permit granted to it in the same instant goes back, to the next waiters.
--
-- KEYS[1] s, KEYS[2] q, KEYS[3] d, KEYS[4] p, KEYS[5] pn (see _lsem.lua)
-- ARGV[1]  hold id
-- ARGV[2]  n, the permits it asked for
-- ARGV[3]  the lease it asked for, in ms
-- ARGV[4]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[5]  optional: the semaphore's expiry in ms (absent or "0": none), see keep_leased in
--          _sem.lua
--
-- Replies (DecodeSem): {0, permits given back, hold ids granted to waiters of the caller's
-- Client (not published)...}.
--@include _lsem
local s, q, d, p, pn = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local hold = ARGV[1]
local member = hold .. ' ' .. ARGV[2] .. ' ' .. ARGV[3]
local now = server_ms()
leave(q, d, member, now)
local back = 0
local e = redis.call('ZSCORE', p, hold)
if e then
  redis.call('ZREM', p, hold)
  if tonumber(e) > now then
    back = tonumber(redis.call('HGET', pn, hold)) or 1
    redis.call('HINCRBY', s, 'u', -back)
  else
    redis.call('HINCRBY', s, 'u', -(tonumber(redis.call('HGET', pn, hold)) or 1))
  end
  redis.call('HDEL', pn, hold)
end
local mine = {}
local v = redis.call('HMGET', s, 't', 'q')
if v[1] and v[2] then
  local total = tonumber(v[1])
  mine = select(2, dispatch(s, q, d, now, total, total - in_use(s, p, pn, now), permits_in(s, p, pn, now),
    ARGV[4], string.sub(hold, 1, 36)))
end
if v[1] then
  keep_leased(ARGV[5])
end
table.insert(mine, 1, 0)
table.insert(mine, 2, back)
return mine
