-- lsem_acquire: one attempt to lease n permits of a leased-permit semaphore.
--
-- KEYS[1] s, KEYS[2] q, KEYS[3] d, KEYS[4] p, KEYS[5] pn (see _lsem.lua)
-- ARGV[1]  hold id, the permit's id once acquired (never used again once it gave up)
-- ARGV[2]  n, the permits asked for (> 0)
-- ARGV[3]  lease in ms (> 0)
-- ARGV[4]  waiter timeout in ms
-- ARGV[5]  "1" to join the queue (or stay in it) when the permits cannot be had now, "0" not to
-- ARGV[6]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[7]  "1" when the hold attempted before (it may have been granted its permit), "0" for
--          its first attempt
-- ARGV[8]  optional: the semaphore's expiry in ms (absent or "0": none), see keep_leased in
--          _sem.lua
--
-- Waiters are served in arrival order, as by sem_acquire.lua; permits whose lease ran out
-- count as available.
--
-- Replies (DecodeAttempt): {status, hint, hold ids granted to waiters of the caller's Client,
-- which were not published: the caller tells them...}, with the statuses of every attempt
-- script: 1 acquired; 2 acquired by a grant made while the hold waited (its message missed);
-- 3 queued; 4 not acquired and not queued; 5 no longer queued (start over under a new hold
-- id); 6 the permits were never set; 7 n is above the total permits (and the hold left the
-- queue). hint, for 3 and 4: ms until the nearest lease
-- end (>= 1), when a waiter that hears nothing looks again; 0 when no permit is leased.
local s, q, d, p, pn = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local hold, n, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local v = redis.call('HMGET', s, 't', 'u', 'q')
if not v[1] then
  return {6, 0}
end
local total = tonumber(v[1])
--@inline local now = server_ms()
local first = ARGV[7] == '0' and redis.call('ZRANGE', p, 0, 0, 'WITHSCORES')
local nearest_end = first and first[2] and tonumber(first[2])
if first and v[3] and ARGV[5] == '1' and n <= total and total - (tonumber(v[2]) or 0) == 0
    and (not nearest_end or nearest_end > now) then
  -- Waiters queued, no permit free and no lease run out: the arrival at a contended
  -- semaphore, which joins the tail as join does (a first attempt cannot be queued already),
  -- with the block inlined to make no definition on this path. Unless it is this attempt run
  -- again (go-redis's retry after a lost reply) after a release granted the permits its first
  -- run queued for: queued a second time, the hold would be granted again once the call is
  -- over, and those permits would stay leased, unused, to the end of their lease.
  if redis.call('ZSCORE', p, hold) then
    --@inline keep_leased(ARGV[8])
    return {2, 0}
  end
  local timeout = tonumber(ARGV[4])
  --@inline join_fresh(q, d, hold .. ' ' .. n .. ' ' .. lease, string.format('%d', now + timeout), timeout)
  --@inline keep_leased(ARGV[8])
  if nearest_end then
    return {3, math.max(1, nearest_end - now)}
  end
  return {3, 0}
end
if first and not v[3] then
  -- Nobody queued and no grant to look for: the uncontended path, taken before any definition
  -- is made (each one costs the server a closure on every run) unless a lease ran out.
  if (not nearest_end or nearest_end > now) and total - (tonumber(v[2]) or 0) >= n then
    -- A hold leased already (this attempt run again by go-redis's retry) is not counted twice.
    --@inline add_permit(s, p, pn, hold, n, lease, now)
    --@inline keep_leased(ARGV[8])
    return {1, 0}
  end
end
--@include _lsem
local avail = total - in_use(s, p, pn, now)
local mine = {}
local status
local flagged = v[3] -- s's q flag, which dispatch clears when it empties the queue
if flagged then
  local emptied
  avail, mine, emptied = dispatch(s, q, d, now, total, avail, permits_in(s, p, pn, now), ARGV[6],
    string.sub(hold, 1, 36))
  flagged = not emptied
end
local member = hold .. ' ' .. n .. ' ' .. lease
-- A hold leased already was granted since an attempt of its own (a first attempt too: run
-- again, see above).
local sc = redis.call('ZSCORE', p, hold)
if sc and tonumber(sc) > now then
  status = 2
elseif n > total then
  leave(q, d, member, now)
  status = 7
elseif avail >= n and not flagged then
  add_permit(s, p, pn, hold, n, lease, now)
  status = 1
elseif ARGV[5] == '1' then
  if join_sem(s, q, d, member, now, tonumber(ARGV[4]), ARGV[7] == '0', flagged) then
    status = 3
  else
    status = 5 -- no longer queued: start over under a new hold id
  end
else
  status = 4
end
local hint = 0
if status == 3 or status == 4 then
  hint = nearest(p, now)
end
keep_leased(ARGV[8])
table.insert(mine, 1, status)
table.insert(mine, 2, hint)
return mine
