-- sem_release: give n permits back to a counting semaphore and serve the queue.
--
-- KEYS[1] s, KEYS[2] q, KEYS[3] d, KEYS[4] g (see sem_acquire.lua)
-- ARGV[1]  n (> 0)
-- ARGV[2]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[3]  the caller's Client id: grants to its own waiters are returned, not published
--
-- Permits are not owned: any caller may release. The available permits never exceed the total.
--
-- Replies: {status, hold ids granted to the caller's Client's waiters}. status: 0 released;
-- -2 the permits were never set; -5 the release would make more permits available than the
-- total (nothing changed).
--@include _sem
local s, q, d, g = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local n = tonumber(ARGV[1])
local v = redis.call('HMGET', s, 't', 'a', 'q')
if not v[1] then
  return {-2}
end
local total, avail = tonumber(v[1]), tonumber(v[2]) + n
if avail > total then
  return {-5}
end
if not v[3] then
  redis.call('HINCRBY', s, 'a', n)
  return {0}
end
local now = server_ms()
local left, mine = dispatch(s, q, d, now, total, avail, grants_in(g, now), ARGV[2], ARGV[3])
redis.call('HSET', s, 'a', left)
table.insert(mine, 1, 0)
return mine
