-- sem_release: give n permits back to a counting semaphore and serve the queue.
--
-- KEYS[1] s, KEYS[2] q, KEYS[3] d, KEYS[4] g (see _sem.lua and _csem.lua)
-- KEYS[5]  optional: "<s>:r:<release id>", a key of this call's own (see below)
-- ARGV[1]  n (> 0)
-- ARGV[2]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[3]  the caller's Client id: grants to its own waiters are returned, not published
-- ARGV[4]  optional: the semaphore's expiry in ms (absent or "0": none), see keep_counting in
--          _sem.lua
--
-- Permits are not owned: any caller may release. The available permits never exceed the total.
--
-- Replies (DecodeSem): {status, 0, hold ids granted to the caller's Client's waiters (not
-- published)...}. status: 0 released; 6 the permits were never set; 8 the release would make
-- more permits available than the total (nothing changed).
local s, q, d, g = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local once = KEYS[5]
-- go-redis re-sends a command whose reply a broken connection lost (MaxRetries), and permits
-- are not owned: a release run twice would give its permits back twice, one holder too many.
-- So each release has a key of its own, set by its first run for 10s (any retry comes within
-- them), and a run that finds it set is the same call again: it changes nothing and answers
-- what the first run did, 0 or the error status it stored.
if once and not redis.call('SET', once, '0', 'NX', 'PX', 10000) then
  return {tonumber(redis.call('GET', once)) or 0, 0}
end
local n = tonumber(ARGV[1])
local v = redis.call('HMGET', s, 't', 'a', 'q')
if v[1] and not v[3] then
  -- Nobody waits: the common release, before any definition is made (each one costs the
  -- server a closure on every run).
  if redis.call('HINCRBY', s, 'a', n) <= tonumber(v[1]) then
    --@inline keep_counting(ARGV[4])
    return {0, 0}
  end
  redis.call('HINCRBY', s, 'a', -n)
  if once then
    redis.call('SET', once, '8', 'PX', 10000)
  end
  --@inline keep_counting(ARGV[4])
  return {8, 0}
end
if v[1] and tonumber(v[2]) + 1125899906842624 == 0 then
  -- Waiters queued and no permit free: the release of a contended semaphore, which hands its
  -- permits to the head when the head is live and asks for exactly as many (each goroutine
  -- of a pool taking and giving back one permit). It grants as dispatch and grants_in do, with
  -- the block inlined to make no definition on this path; anything else falls to them below.
  -- Nothing is written before it is sure to go this way.
  local m = redis.call('LINDEX', q, 0)
  local sp = m and string.find(m, ' ', 38, true)
  if sp and tonumber(string.sub(m, sp + 1)) == n and n <= tonumber(v[1]) then
    local deadline = tonumber(redis.call('ZSCORE', d, m))
    --@inline local now = server_ms()
    if deadline and deadline > now then
      redis.call('LPOP', q)
      redis.call('ZREM', d, m)
      local hold = string.sub(m, 1, sp - 1)
      --@inline record_grant(g, m, hold, deadline, now)
      --@inline keep_counting(ARGV[4])
      local client = string.sub(hold, 1, 36)
      if client == ARGV[3] then
        return {0, 0, hold}
      end
      redis.call(ARGV[2], s .. ':c:' .. client, hold)
      return {0, 0}
    end
  end
end
--@include _csem
local c = counts(s, v)
if not c.total then
  if once then
    redis.call('SET', once, '6', 'PX', 10000)
  end
  return {6, 0}
end
if c.avail + n > c.total then
  if once then
    redis.call('SET', once, '8', 'PX', 10000)
  end
  keep_counting(ARGV[4])
  return {8, 0}
end
c.avail = c.avail + n
local mine = {}
if c.gated then
  mine = serve(s, q, d, g, c, server_ms(), ARGV[2], ARGV[3])
end
save(s, c)
keep_counting(ARGV[4])
table.insert(mine, 1, 0)
table.insert(mine, 2, 0)
return mine
