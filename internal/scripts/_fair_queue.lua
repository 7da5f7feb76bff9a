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

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- live_head drops dead waiters and ghosts at the head of the queue and returns the live
-- head's member, or nil when no live waiter is left.
local function live_head(q, d, now)
  while true do
    local m = redis.call('LINDEX', q, 0)
    if not m then
      return nil
    end
    local s = redis.call('ZSCORE', d, m)
    if s and tonumber(s) > now then
      return m
    end
    redis.call('LPOP', q)
    redis.call('ZREM', d, m)
  end
end

-- hand_off gives the lock at l to the live head of the queue, with the lease it asked for,
-- and notifies that waiter's Client only (channel l .. ':c:' .. client id, message = the hold
-- id); with no live waiter it frees the lock. It returns the hold id granted, or false.
local function hand_off(l, q, d, now, pub)
  local m = live_head(q, d, now)
  if not m then
    redis.call('DEL', l)
    return false
  end
  local hold, lease = string.match(m, '^(%S+) (%d+)$')
  redis.call('LPOP', q)
  redis.call('ZREM', d, m)
  local value = hold
  if redis.call('LLEN', q) > 0 then
    value = value .. ' w'
  end
  redis.call('SET', l, value, 'PX', lease)
  redis.call(pub, l .. ':c:' .. string.match(hold, '^(.*):%d+$'), hold)
  return hold
end

-- valid_holder returns the hold id of a lock value, or raises WRONGTYPE for a value aqs did
-- not write.
local function holder_of(v)
  local hold = string.match(v, '^(%x+%-%x+%-%x+%-%x+%-%x+:%d+)')
  if not hold then
    error({err = 'WRONGTYPE the lock key holds a value aqs did not write'})
  end
  return hold
end
