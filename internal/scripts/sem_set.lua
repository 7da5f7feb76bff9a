-- sem_set: set a semaphore's permits, only if they were never set (TrySetPermits), or change
-- them by a delta (AddPermits), for both kinds of semaphore.
--
-- KEYS[1] s, KEYS[2] q, KEYS[3] d, KEYS[4] g for the counting semaphore (see _csem.lua), or
--         KEYS[4] p and KEYS[5] pn for the leased one (see _lsem.lua)
-- ARGV[1]  "set" or "add"
-- ARGV[2]  permits to set (>= 0), or the delta
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[4]  the caller's Client id
-- ARGV[5]  "c" counting, "l" leased
-- ARGV[6]  optional: the semaphore's expiry in ms (absent or "0": none), see keep_counting and
--          keep_leased in _sem.lua
--
-- A reduction needs as many permits available as it removes (it never waits); it wakes waiters
-- that now ask for more than the total, which then fail. An addition serves the queue.
--
-- Replies (DecodeSem): {status, changed, hold ids granted to waiters of the caller's Client
-- (not published)...}. status: 0 done, changed 1 when set or changed, 0 when already set (set
-- only); 10 a reduction larger than the available permits (nothing changed).
--@include _csem
--@include _lsem
local s, q, d, x, xn = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
-- keep keeps the semaphore, of either kind, with an expiry.
local function keep()
  if ARGV[5] == 'l' then
    keep_leased(ARGV[6])
  else
    keep_counting(ARGV[6])
  end
end
local k = tonumber(ARGV[2])
local mine = {}
if ARGV[5] == 'l' then
  local v = redis.call('HMGET', s, 't', 'q')
  if ARGV[1] == 'set' then
    if v[1] then
      keep()
      return {0, 0}
    end
    redis.call('HSET', s, 't', k, 'u', 0)
    keep()
    return {0, 1}
  end
  local now = server_ms()
  local total = tonumber(v[1]) or 0
  local avail = total - in_use(s, x, xn, now)
  if avail + k < 0 then
    keep()
    return {10, 0}
  end
  total = total + k
  redis.call('HSET', s, 't', total)
  if v[2] then
    mine = select(2, dispatch(s, q, d, now, total, avail + k, permits_in(s, x, xn, now), ARGV[3], ARGV[4]))
  end
else
  -- Counting: a may hold failed plain decrements (see _csem.lua), so it is only ever added to.
  local c = counts(s)
  if ARGV[1] == 'set' then
    if c.total then
      keep()
      return {0, 0}
    end
    c.total = k
  else
    if c.avail + k < 0 then
      keep()
      return {10, 0}
    end
    c.total = (c.total or 0) + k
  end
  redis.call('HSET', s, 't', c.total)
  c.avail = c.avail + k
  if c.gated then
    mine = serve(s, q, d, x, c, server_ms(), ARGV[3], ARGV[4])
  end
  save(s, c)
end
keep()
table.insert(mine, 1, 0)
table.insert(mine, 2, 1)
return mine
