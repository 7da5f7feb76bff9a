-- _fair_queue: the fair lock's wait queue, a fragment included by every fair_* script.
--
-- The queue is two keys in the lock's slot:
--   q  a list of members "<hold id> <lease ms>" in arrival order;
--   d  a zset of the same members scored by their liveness deadline (server time, ms).
-- A waiter is live while now < its deadline; its Client refreshes the deadline in batches
-- (fair_heartbeat.lua), and each of its attempts does too. A waiter that gave up is removed
-- from d only (ZREM is O(log N), LREM would be O(N)); its list entry is a ghost that is
-- dropped when it reaches the head. Only the head is ever examined, so every operation is
-- O(log N) in the queue length and no score is ever rewritten for anyone else.
--@include _lock_value

local now_ms = server_ms

-- live_head drops dead waiters and ghosts at the head of the queue and returns the live
-- head's member and its liveness deadline, or nil when no live waiter is left.
local function live_head(q, d, now)
  while true do
    local m = redis.call('LINDEX', q, 0)
    if not m then
      return nil
    end
    local s = redis.call('ZSCORE', d, m)
    if s and tonumber(s) > now then
      return m, tonumber(s)
    end
    redis.call('LPOP', q)
    redis.call('ZREM', d, m)
  end
end

-- set_holder makes hold the holder of l for lease ms. While others wait, the value records
-- the lease end (e) and the key lives on until the next waiter's liveness deadline after it,
-- so that it never vanishes under a live waiter (see _lock_value.lua).
local function set_holder(l, q, d, value, lease, now)
  local next = redis.call('LINDEX', q, 0)
  if not next then
    redis.call('SET', l, value, 'PX', lease)
    return
  end
  local ttl = lease
  local s = redis.call('ZSCORE', d, next)
  if s and tonumber(s) - now > ttl then
    ttl = tonumber(s) - now
  end
  redis.call('SET', l, value .. ' w e' .. (now + lease), 'PX', ttl + lease)
end

-- grant gives the lock at l to a waiter taken off the head of the queue. The lease runs, at
-- first, only to the waiter's liveness deadline (if that is sooner than the lease it asked
-- for): a waiter that died a moment before its turn holds the lock no longer than it would
-- have stalled the queue, and a live one extends the lease to its own as soon as it has the
-- grant.
local function grant(l, q, d, m, deadline, now)
  local hold, lease = string.match(m, '^(%S+) (%d+)$')
  redis.call('LPOP', q)
  redis.call('ZREM', d, m)
  lease = math.max(1, math.min(tonumber(lease), deadline - now))
  -- Marked w and e whether or not others wait (cheaper than looking on this hot path: at worst
  -- the next release looks at an empty queue once); the key outlives the lease by the granted
  -- waiter's own liveness horizon, which the other waiters' heartbeats then keep extending.
  redis.call('SET', l, hold .. ' w e' .. (now + lease), 'PX', lease + math.max(deadline - now, lease))
  return hold
end

-- hand_off gives the lock at l to the live head of the queue and notifies that waiter's
-- Client only (channel l .. ':c:' .. client id, message = the hold id); with no live waiter it
-- frees the lock. It returns the hold id granted, or false.
local function hand_off(l, q, d, now, pub)
  local m, deadline = live_head(q, d, now)
  if not m then
    redis.call('DEL', l)
    return false
  end
  local hold = grant(l, q, d, m, deadline, now)
  redis.call(pub, l .. ':c:' .. string.match(hold, '^(.*):%d+$'), hold)
  return hold
end
