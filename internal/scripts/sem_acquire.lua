-- sem_acquire: one attempt to take n permits of a counting semaphore.
--
-- KEYS[1] s, KEYS[2] q, KEYS[3] d, KEYS[4] g (see _sem.lua; g is a zset of granted queue
--         members scored by the waiter's liveness deadline at the grant: the fallback for a
--         lost grant message, dropped after that deadline)
-- ARGV[1]  hold id (never used again once it gave up)
-- ARGV[2]  n, the permits asked for (> 0)
-- ARGV[3]  waiter timeout in ms
-- ARGV[4]  "1" to join the queue (or stay in it) when the permits cannot be had now, "0" not to
-- ARGV[5]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[6]  "1" when the hold attempted before (it may have been granted permits), "0" for its
--          first attempt, which takes the uncontended path while nobody is queued
--
-- Waiters are served in arrival order: while a live waiter is queued, nobody takes permits
-- past it, and a release grants them to the waiters in order (see dispatch in _sem.lua).
--
-- Replies: {status, hold ids granted to waiters of the caller's Client, which were not
-- notified: the caller tells them}. status: 1 acquired; 2 acquired by a grant made while the
-- hold waited (its message missed); 0 not acquired, not queued; -1 queued; -2 the permits
-- were never set; -3 n is above the total permits (and the hold left the queue).
--@include _sem
local s, q, d, g = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local hold, n = ARGV[1], tonumber(ARGV[2])
local v = redis.call('HMGET', s, 't', 'a', 'q')
if not v[1] then
  return {-2}
end
local total, avail = tonumber(v[1]), tonumber(v[2])
if not v[3] and ARGV[6] == '0' then
  -- Nobody queued and no grant to look for: the uncontended path.
  if n > total then
    return {-3}
  end
  if avail >= n then
    redis.call('HINCRBY', s, 'a', -n)
    return {1}
  end
  if ARGV[4] == '0' then
    return {0}
  end
  local now = server_ms()
  join(s, q, d, hold .. ' ' .. n, now, tonumber(ARGV[3]))
  return {-1}
end
local now = server_ms()
local member = hold .. ' ' .. n
local left, mine = avail, {}
if v[3] then
  left, mine = dispatch(s, q, d, now, total, avail, grants_in(g, now), ARGV[5], string.sub(hold, 1, 36))
  if left ~= avail then
    redis.call('HSET', s, 'a', left)
  end
end
local status
if take_grant(g, member, now) then
  status = 2
elseif n > total then
  leave(q, d, member, now)
  status = -3
elseif left >= n and not (v[3] and redis.call('LINDEX', q, 0)) then
  redis.call('HSET', s, 'a', left - n)
  status = 1
elseif ARGV[4] == '1' then
  join(s, q, d, member, now, tonumber(ARGV[3]))
  status = -1
else
  status = 0
end
table.insert(mine, 1, status)
return mine
