-- _rw: the read-write lock, a fragment included by every rw_* script.
--
-- A read-write lock named n has, all in n's slot:
--   w   "aqs:{n}"      the write side: an exclusive-lock value (see _lock_value.lua) while a
--                      writer holds, its TTL the writer's lease
--   r   "aqs:{n}:r"    a zset of read holds scored by their lease end (server time, ms): each
--                      reader has its own lease, and a reader is live while its score > now
--   rn  "aqs:{n}:rn"   a hash of read holds that were re-entered: hold -> re-entries (a hold
--                      absent here holds once)
--   q, d               the wait queue (see _queue.lua), readers and writers in one queue, in
--                      arrival order: members "<hold id> <lease ms> s" (a reader, shared) or
--                      "<hold id> <lease ms> x" (a writer, exclusive)
-- and one grant channel per Client (see tell in _queue.lua).
--
-- The queue is served as Java's AbstractQueuedSynchronizer serves a ReentrantReadWriteLock's:
-- when no writer holds, the live head is granted what it waits for if it can have it, and a
-- reader's grant propagates to the readers behind it, up to the next writer (serve). So
-- readers and writers are served in arrival order. In the fair mode a newcomer never passes
-- a live waiter, so a reader waits at most for the writers queued ahead of it, a writer for the
-- holds ahead of it, and neither side starves. In the non-fair mode a new reader enters
-- whenever no writer holds, whatever waits (the queue is still served in order), so a stream
-- of readers can hold a waiting writer back for as long as it lasts.
--
-- Every question is answered by a point lookup or by the first entry of a range, never by a
-- scan: the cost of an operation does not grow with the number of readers.
--@include _lock_value
--@include _queue

-- live_first returns the score of the first entry of zset z whose score is above now (the
-- nearest live lease end), or nil.
local function live_first(z, now)
  local e = redis.call('ZRANGEBYSCORE', z, '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if e[2] then
    return tonumber(e[2])
  end
  return nil
end

-- keep_alive makes key k live at least ms more, extending it to twice that when it would not
-- (so that a stream of holds extends it once in a while, not on every call).
--@block keep_alive(k, ms)
if redis.call('PTTL', k) < ms then
  redis.call('PEXPIRE', k, 2 * ms)
end
--@end

-- rw_member returns a queue member's hold id, lease (ms) and mode ("s" or "x"). A member of
-- another primitive's shape (a name used for two kinds) is taken for a writer, with the lease
-- its number says, or none.
local function rw_member(m)
  local a = string.find(m, ' ', 38, true)
  local b = string.find(m, ' ', a + 1, true)
  if not b then
    return string.sub(m, 1, a - 1), tonumber(string.sub(m, a + 1)) or 1, 'x'
  end
  return string.sub(m, 1, a - 1), tonumber(string.sub(m, a + 1, b - 1)) or 1, string.sub(m, b + 1)
end

-- add_reader makes hold a reader until now + lease.
--@block add_reader(r, hold, lease, now)
redis.call('ZADD', r, string.format('%d', now + lease), hold)
--@inline keep_alive(r, lease)
--@end

-- serve grants the queue's live head what it waits for, while it can have it: nothing while a
-- writer holds; a writer when no reader's lease runs either, and then nobody after it; a
-- reader, and then the next one. A grant's lease runs, at first, only to the waiter's
-- liveness deadline when that is sooner than the lease it asked for (as a lock's grant: see
-- _lock.lua). It returns the hold ids granted.
local function serve(w, r, q, d, now)
  local granted = {}
  if not redis.call('LINDEX', q, 0) or redis.call('EXISTS', w) == 1 then
    return granted
  end
  local readers = live_first(r, now) ~= nil
  while true do
    local m, deadline = live_head(q, d, now)
    if not m then
      return granted
    end
    local hold, lease, mode = rw_member(m)
    if mode == 'x' and readers then
      return granted
    end
    redis.call('LPOP', q)
    redis.call('ZREM', d, m)
    lease = math.max(1, math.min(lease, deadline - now))
    granted[#granted + 1] = hold
    if mode == 'x' then
      redis.call('SET', w, hold, 'PX', lease)
      return granted
    end
    add_reader(r, hold, lease, now)
    readers = true
  end
end

-- holds_it reports whether hold holds in mode: the write side ("x") or a live read hold ("s").
local function holds_it(w, r, hold, mode, now)
  if mode == 'x' then
    local v = redis.call('GET', w)
    return v and owns(v, hold) or false
  end
  local s = redis.call('ZSCORE', r, hold)
  return s and tonumber(s) > now or false
end

-- drop_reader ends a read hold: out of r and rn.
local function drop_reader(r, rn, hold)
  redis.call('ZREM', r, hold)
  redis.call('HDEL', rn, hold)
end

-- take_out removes hold from the list of granted hold ids and reports whether it was there.
local function take_out(granted, hold)
  for i, g in ipairs(granted) do
    if g == hold then
      table.remove(granted, i)
      return true
    end
  end
  return false
end

-- attempt_reply is an attempt's reply {status, value, grants to the caller's Client...}.
local function attempt_reply(status, value, mine)
  local out = {status, value}
  for _, h in ipairs(mine) do
    out[#out + 1] = h
  end
  return out
end

-- beat_rw_waiter is rw_heartbeat.lua's heartbeat of hold waiting in mode, queued as member
-- (its reply): it renews a live waiter's deadline and serves the queue (publishing with pub).
local function beat_rw_waiter(w, r, q, d, hold, mode, member, timeout, pub, now)
  local s = redis.call('ZSCORE', d, member)
  if s then
    if tonumber(s) <= now then
      redis.call('ZREM', d, member) -- dead already: it is not revived
      return 0
    end
    redis.call('ZADD', d, string.format('%d', now + timeout), member)
    keep_queue(q, d, timeout)
    tell(serve(w, r, q, d, now), w, pub, nil)
  end
  if holds_it(w, r, hold, mode, now) then
    return 2
  end
  if s then
    return 1
  end
  return 0
end
