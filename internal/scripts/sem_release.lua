-- sem_release: give n permits back to a counting semaphore and serve the queue.
--
-- KEYS[1] s, KEYS[2] q, KEYS[3] d, KEYS[4] g (see _sem.lua and _csem.lua)
-- ARGV[1]  n (> 0)
-- ARGV[2]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[3]  the caller's Client id: grants to its own waiters are returned, not published
--
-- Permits are not owned: any caller may release. The available permits never exceed the total.
--
-- Replies: {status, hold ids granted to the caller's Client's waiters}, or status alone when
-- nobody waits. status: 0 released; -2 the permits were never set; -5 the release would make
-- more permits available than the total (nothing changed).
local s, q, d, g = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local n = tonumber(ARGV[1])
local v = redis.call('HMGET', s, 't', 'q')
if v[1] and not v[2] then
  -- Nobody waits: the common release, before any definition is made (each one costs the
  -- server a closure on every run).
  if redis.call('HINCRBY', s, 'a', n) <= tonumber(v[1]) then
    return 0
  end
  redis.call('HINCRBY', s, 'a', -n)
  return -5
end
--@include _csem
local c = counts(s, 0)
if not c.total then
  return {-2}
end
if c.avail + n > c.total then
  return {-5}
end
c.avail = c.avail + n
local mine = {}
if c.gated then
  mine = serve(s, q, d, g, c, server_ms(), ARGV[2], ARGV[3])
end
save(s, c)
table.insert(mine, 1, 0)
return mine
