-- sem_give_up: a waiter of a counting semaphore stops waiting (its context ended, or its
-- wait bound); permits granted to it in the same instant go back, to the next waiters.
--
-- KEYS[1] s, KEYS[2] q, KEYS[3] d, KEYS[4] g (see sem_acquire.lua)
-- ARGV[1]  hold id
-- ARGV[2]  n, the permits it asked for
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
--
-- Replies: {permits given back, hold ids granted to waiters of the caller's Client}.
--@include _sem
local s, q, d, g = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local hold, n = ARGV[1], tonumber(ARGV[2])
local member = hold .. ' ' .. n
local now = server_ms()
leave(q, d, member, now)
local back = 0
if take_grant(g, member, now) then
  back = n
end
local v = redis.call('HMGET', s, 't', 'a', 'q')
if not v[1] then
  return {0}
end
local avail = tonumber(v[2]) + back
local mine = {}
if v[3] then
  avail, mine = dispatch(s, q, d, now, tonumber(v[1]), avail, grants_in(g, now), ARGV[3],
    string.sub(hold, 1, 36))
end
if avail ~= tonumber(v[2]) then
  redis.call('HSET', s, 'a', avail)
end
table.insert(mine, 1, back)
return mine
