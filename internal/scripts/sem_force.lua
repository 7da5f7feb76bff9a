-- sem_force: release every permit of a semaphore, whoever took them (administration), and
-- serve the queue, for both kinds of semaphore.
--
-- KEYS[1] s, KEYS[2] q, KEYS[3] d, KEYS[4] g for the counting semaphore (see _csem.lua), or
--         KEYS[4] p and KEYS[5] pn for the leased one (see _lsem.lua)
-- ARGV[1]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[2]  the caller's Client id: grants to its own waiters are returned, not published
-- ARGV[3]  "c" counting, "l" leased
-- ARGV[4]  optional: the semaphore's expiry in ms (absent or "0": none), see keep_counting and
--          keep_leased in _sem.lua
--
-- Counting: every permit is available again (available = total). The grant records (g) go
-- too: a waiter granted permits before this call whose message was lost must not collect them
-- as well; its next heartbeat finds it no longer queued, and it queues anew.
-- Leased: every leased permit is dropped (p, pn, and u set to 0), so the renewals and releases
-- of their holders fail: their held contexts end with ErrLockLost.
-- Either way the queue is then served in order, as a release serves it.
--
-- Replies (DecodeSem): {0, released, hold ids granted to waiters of the caller's Client (not
-- published)...}: released is the number of permits that were taken (counting) or leased to
-- live permits (leased); {6, 0} when the permits were never set (nothing changed).
--@include _csem
--@include _lsem
local s, q, d, x, xn = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local pub, from = ARGV[1], ARGV[2]
local now = server_ms()
local released
local mine = {}
if ARGV[3] == 'l' then
  local v = redis.call('HMGET', s, 't', 'q')
  if not v[1] then
    return {6, 0}
  end
  local total = tonumber(v[1])
  released = in_use(s, x, xn, now)
  redis.call('DEL', x, xn)
  redis.call('HSET', s, 'u', 0)
  if v[2] then
    mine = select(2, dispatch(s, q, d, now, total, total, permits_in(s, x, xn, now), pub, from))
  end
else
  local c = counts(s)
  if not c.total then
    return {6, 0}
  end
  released = math.max(c.total - c.avail, 0)
  c.avail = c.total
  redis.call('DEL', x)
  if c.gated then
    mine = serve(s, q, d, x, c, now, pub, from)
  end
  save(s, c)
end
if ARGV[3] == 'l' then
  keep_leased(ARGV[4])
else
  keep_counting(ARGV[4])
end
table.insert(mine, 1, 0)
table.insert(mine, 2, released)
return mine
