-- _lock: the exclusive lock on its queue, a fragment included by the lock_* scripts (the
-- reentrant and the fair lock share them).
--
-- Keys, all in the lock's slot: l the lock value (see _lock_value.lua), q and d its queue
-- (see _queue.lua), whose members are "<hold id> <lease ms>": the lease the waiter will have.
--@include _lock_value
--@include _queue

-- set_holder makes value's hold the holder of l for lease ms, dropping the ghosts and dead
-- waiters at the queue's head (see live_head). While others wait, the value
-- records the lease end (e) and the key lives on until the next waiter's liveness deadline
-- after it, so that it never vanishes under a live waiter (see _lock_value.lua).
local function set_holder(l, q, d, value, lease, now)
  local next, s = live_head(q, d, now)
  if not next then
    redis.call('SET', l, value, 'PX', lease)
    return
  end
  redis.call('SET', l, value .. ' w e' .. string.format('%d', now + lease), 'PX',
    math.max(s - now, lease) + lease)
end

-- grant gives the lock at l to the waiter m, already taken off the queue, whose liveness
-- deadline is deadline. The lease runs, at first, only to that deadline (if that is sooner
-- than the lease it asked for): a waiter that died a moment before its turn holds the lock no
-- longer than it would have stalled the queue, and a live one extends the lease to its own as
-- soon as it has the grant. It returns the hold id and the lease granted.
local function grant(l, m, deadline, now, keep)
  local sp = string.find(m, ' ', 38, true)
  local hold = string.sub(m, 1, sp - 1)
  -- A member of another primitive's shape (a name used for two kinds) gets the deadline.
  local lease = math.max(1, math.min(tonumber(string.sub(m, sp + 1)) or deadline - now, deadline - now))
  -- Marked w and e whether or not others wait (cheaper than looking on this hot path: at worst
  -- the next release looks at an empty queue once). The key outlives the lease by twice the
  -- granted waiter's own liveness horizon, which is at least two thirds of a waiter timeout
  -- while heartbeats keep time, and by keep: so the next joiner finds the key alive long
  -- enough and need not extend it on every hand-off.
  redis.call('SET', l, hold .. ' w e' .. string.format('%d', now + lease),
    'PX', string.format('%d', lease + math.max(2 * (deadline - now), lease, keep or 0)))
  return hold, lease
end

-- hand_off gives the lock at l to the live head of the queue and tells that waiter's Client
-- (see tell in _queue.lua); with no live waiter it frees the lock. It returns the hold id
-- granted, whether it is a waiter of Client from (not published: the caller tells it), and
-- its lease; or nil when the lock was freed.
local function hand_off(l, q, d, now, pub, from, keep)
  local m, deadline = pop_live_head(q, d, now)
  if not m then
    redis.call('DEL', l)
    return nil
  end
  local hold, lease = grant(l, m, deadline, now, keep)
  return hold, #tell({hold}, l, pub, from) > 0, lease
end

-- end_hold ends hold's hold of l, known to be live, and hands the lock on, the general way of
-- lock_release.lua (whose header says what pick, over and the riders are): to pick when it may
-- have it, else, after the riders ARGV[first_rider..] joined the queue, to the queue's live
-- head (hand_off). It returns lock_release.lua's reply.
local function end_hold(l, q, d, hold, now, pick, over, pub, timeout, first_rider)
  local first = pick ~= '' and live_head(q, d, now)
  local other = first and first ~= pick and string.sub(first, 1, 36) ~= string.sub(hold, 1, 36)
  if pick ~= '' and (over == '0' or not other) then
    local sp = string.find(pick, ' ', 38, true)
    local next, lease = string.sub(pick, 1, sp - 1), tonumber(string.sub(pick, sp + 1))
    redis.call('ZREM', d, pick)
    set_holder(l, q, d, next, lease, now)
    return {2, next, lease, 0, other and 1 or 0}
  end
  local keep = 0
  if ARGV[first_rider] then
    for i = first_rider, #ARGV do
      join(q, d, ARGV[i], now, timeout, true)
    end
    keep = 2 * timeout
  end
  local next, mine, lease = hand_off(l, q, d, now, pub, string.sub(hold, 1, 36), keep)
  if not next then
    return {1}
  end
  if mine then
    return {2, next, lease, 1, 0}
  end
  return {3}
end

-- beat_waiter is lock_heartbeat.lua's heartbeat of hold, queued as member (its reply): it
-- renews a live waiter's deadline, keeps the lock key alive beyond the holder's lease, and
-- takes a free lock kept for it.
local function beat_waiter(l, q, d, hold, member, timeout, now)
  local s = redis.call('ZSCORE', d, member)
  local v = live_value(redis.call('GET', l), now)
  if s then
    if tonumber(s) <= now then
      redis.call('ZREM', d, member) -- dead already: it is not revived
      return 0
    end
    redis.call('ZADD', d, now + timeout, member)
    keep_queue(q, d, timeout)
    local e = v and lease_end(v)
    if e and redis.call('PTTL', l) < e - now + timeout then
      redis.call('PEXPIRE', l, e - now + 2 * timeout) -- the key outlives the lease while we wait
    end
    if not v and live_head(q, d, now) == member then
      -- The lock is free and kept for this waiter (the holder's lease ran out, or a waiter it
      -- was handed to died): take it now rather than at the waiter's next attempt.
      redis.call('LPOP', q)
      redis.call('ZREM', d, member)
      grant(l, member, now + timeout, now)
      return 2
    end
    return 1
  end
  if v and owns(v, hold) then
    return 2
  end
  return 0
end

-- mark_waited is a join's mark on the live value v of l that waiters are queued behind its
-- holder: the lock is marked w (its release hands off), records its lease end e (now + wait
-- when it did not yet) and lives on beyond it while they wait (see _lock_value.lua).
local function mark_waited(l, v, e, now, wait, timeout)
  if not e then
    local marked = v
    if not string.find(v, ' w', 38, true) then
      marked = marked .. ' w'
    end
    redis.call('SET', l, marked .. ' e' .. string.format('%d', now + wait), 'PX', wait + 2 * timeout)
  elseif redis.call('PTTL', l) < e - now + timeout then
    redis.call('PEXPIRE', l, e - now + 2 * timeout)
  end
end
