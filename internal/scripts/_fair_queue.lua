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
-- head's member and its liveness deadline, or nil when no live waiter is left. The head stays
-- queued.
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

-- pop_live_head takes the live head off the queue (dropping dead waiters and ghosts before it)
-- and returns its member and liveness deadline, or nil when no live waiter is left.
local function pop_live_head(q, d, now)
  while true do
    local m = redis.call('LPOP', q)
    if not m then
      return nil
    end
    local s = redis.call('ZSCORE', d, m)
    if s then
      redis.call('ZREM', d, m)
      s = tonumber(s)
      if s > now then
        return m, s
      end
    end
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
  redis.call('SET', l, value .. ' w e' .. string.format('%d', now + lease), 'PX', ttl + lease)
end

-- grant gives the lock at l to the waiter m, already taken off the queue, whose liveness
-- deadline is deadline. The lease runs, at first, only to that deadline (if that is sooner
-- than the lease it asked for): a waiter that died a moment before its turn holds the lock no
-- longer than it would have stalled the queue, and a live one extends the lease to its own as
-- soon as it has the grant. It returns the hold id.
local function grant(l, m, deadline, now)
  local sp = string.find(m, ' ', 38, true)
  local hold = string.sub(m, 1, sp - 1)
  local lease = math.max(1, math.min(tonumber(string.sub(m, sp + 1)), deadline - now))
  -- Marked w and e whether or not others wait (cheaper than looking on this hot path: at worst
  -- the next release looks at an empty queue once). The key outlives the lease by twice the
  -- granted waiter's own liveness horizon, which is at least two thirds of a waiter timeout
  -- while heartbeats keep time: so the next joiner finds the key alive long enough (see
  -- fair_acquire.lua) and need not extend it on every hand-off; heartbeats extend it later.
  redis.call('SET', l, hold .. ' w e' .. string.format('%d', now + lease),
    'PX', lease + math.max(2 * (deadline - now), lease))
  return hold
end

-- hand_off gives the lock at l to the live head of the queue and notifies that waiter's
-- Client only (channel l .. ':c:' .. client id, message = the hold id); with no live waiter it
-- frees the lock. from is the hold id of the releasing holder, or nil: when the waiter is of
-- the same Client, nothing is published, and the caller, who gets the hold id, tells the
-- waiter itself (no pub/sub message to send or receive on the hot path of a contended
-- process). It returns the hold id granted and whether it was left to the caller to tell, or
-- false.
local function hand_off(l, q, d, now, pub, from)
  local m, deadline = pop_live_head(q, d, now)
  if not m then
    redis.call('DEL', l)
    return false
  end
  local hold = grant(l, m, deadline, now)
  local client = string.sub(hold, 1, 36)
  if from and string.sub(from, 1, 36) == client then
    return hold, true
  end
  redis.call(pub, l .. ':c:' .. client, hold)
  return hold, false
end
