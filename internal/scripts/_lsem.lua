-- _lsem: the leased-permit semaphore's permits, a fragment included by every lsem_* script.
--
-- Besides the keys of _sem.lua (s's field u is the number of permits in p, counting entries
-- whose lease ran out but that were not yet dropped):
--   p   "aqs:{n}:p"   a zset of leased permits: permit id -> lease end (server ms); a permit is
--                     live while its score > now. Each permit has its own lease, renewed by its
--                     Client's watchdog or fixed.
--   pn  "aqs:{n}:pn"  a hash: permit id -> permits it holds, for permits holding more than one
--                     (absent: one)
--   pr  "aqs:{n}:pr"  a zset of the permits released by their id (lsem_release_id.lua): permit
--                     id -> the lease end the permit had, until which its holder's renewal and
--                     release learn that it was released, not lost; it lives a second beyond
--                     the latest of them
-- A permit's id is the hold id of the acquisition that got it. p and pn live a second beyond
-- the latest lease end they record (keep_permits; each write of a lease extends them), so
-- that an abandoned semaphore leaves only s: a p gone means every lease in it had ended, and
-- in_use then counts no permit leased out.
--@include _sem

-- in_use drops the permits whose lease ran out (each once: the cost is paid by the permit, so
-- it does not grow with the number of live permits) and returns the permits leased out.
local function in_use(s, p, pn, now)
  local gone = redis.call('ZRANGEBYSCORE', p, '-inf', now)
  if #gone == 0 then
    local u = tonumber(redis.call('HGET', s, 'u')) or 0
    if u > 0 and redis.call('EXISTS', p) == 0 then
      redis.call('HDEL', s, 'u') -- p expired: the leases it held all ended
      return 0
    end
    return u
  end
  local back = 0
  for _, id in ipairs(gone) do
    back = back + (tonumber(redis.call('HGET', pn, id)) or 1)
  end
  redis.call('HDEL', pn, unpack(gone))
  redis.call('ZREMRANGEBYSCORE', p, '-inf', now)
  return redis.call('HINCRBY', s, 'u', -back)
end

-- keep_permits keeps p, and pn when with_pn, alive at least ms + 1000 more (extending their
-- TTL, never shortening it).
--@block keep_permits(p, pn, ms, with_pn)
--@inline extend_ttl(p, ms + 1000)
if with_pn then
  --@inline extend_ttl(pn, ms + 1000)
end
--@end

-- add_permit leases n permits to id until now + lease. A permit id that is leased already
-- (the same acquisition run again: go-redis re-sends a command whose reply a broken connection
-- lost) only has its lease set: its permits are not counted twice.
--@block add_permit(s, p, pn, id, n, lease, now)
local added = redis.call('ZADD', p, string.format('%d', now + lease), id)
if added == 1 and n > 1 then
  redis.call('HSET', pn, id, n)
end
--@inline keep_permits(p, pn, lease, n > 1)
if added == 1 then
  redis.call('HINCRBY', s, 'u', n)
end
--@end

-- permits_in returns the leased semaphore's give (see dispatch): the waiter's permit is
-- created at once, its lease running at first only to the waiter's liveness deadline when
-- that is sooner than the lease asked for, so that a waiter that died a moment before its turn
-- holds no longer than it would have stalled the queue; a live one extends it when it learns.
local function permits_in(s, p, pn, now)
  return function(_, hold, n, lease, deadline)
    add_permit(s, p, pn, hold, n, math.max(1, math.min(lease, deadline - now)), now)
  end
end

-- nearest returns the ms until the nearest lease end of a live permit (>= 1), or 0 when none:
-- how long a waiter that hears nothing waits before it looks again.
local function nearest(p, now)
  local e = redis.call('ZRANGE', p, 0, 0, 'WITHSCORES')
  if e[2] then
    return math.max(1, tonumber(e[2]) - now)
  end
  return 0
end
