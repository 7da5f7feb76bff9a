-- sem_set: set a semaphore's permits, only if they were never set (TrySetPermits), or change
-- them by a delta (AddPermits), for both kinds of semaphore.
--
-- KEYS[1] s, KEYS[2] q, KEYS[3] d, KEYS[4] g for the counting semaphore (see sem_acquire.lua),
--         or KEYS[4] p and KEYS[5] pn for the leased one (see _lsem.lua)
-- ARGV[1]  "set" or "add"
-- ARGV[2]  permits to set (>= 0), or the delta
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[4]  the caller's Client id
-- ARGV[5]  "c" counting, "l" leased
--
-- A reduction needs as many permits available as it removes (it never waits); it wakes waiters
-- that now ask for more than the total, which then fail. An addition serves the queue.
--
-- Replies: {status, hold ids granted to waiters of the caller's Client}. status: 1 set or
-- changed; 0 already set (set only); -4 a reduction larger than the available permits.
--@include _lsem
local s, q, d, x, xn = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local k = tonumber(ARGV[2])
local leased = ARGV[5] == 'l'
local v = redis.call('HMGET', s, 't', 'a', 'q')
if ARGV[1] == 'set' then
  if v[1] then
    return {0}
  end
  if leased then
    redis.call('HSET', s, 't', k, 'u', 0)
  else
    redis.call('HSET', s, 't', k, 'a', k)
  end
  return {1}
end
local now = server_ms()
local total, avail = tonumber(v[1]) or 0, 0
if leased then
  avail = total - in_use(s, x, xn, now)
else
  avail = tonumber(v[2]) or 0
end
if avail + k < 0 then
  return {-4}
end
total, avail = total + k, avail + k
redis.call('HSET', s, 't', total)
if not leased then
  redis.call('HSET', s, 'a', avail)
end
local mine = {}
if v[3] then
  local give
  if leased then
    give = permits_in(s, x, xn, now)
  else
    give = grants_in(x, now)
  end
  local left
  left, mine = dispatch(s, q, d, now, total, avail, give, ARGV[3], ARGV[4])
  if not leased and left ~= avail then
    redis.call('HSET', s, 'a', left)
  end
end
table.insert(mine, 1, 1)
return mine
