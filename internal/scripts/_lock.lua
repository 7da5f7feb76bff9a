-- _lock: the exclusive lock on its queue, a fragment included by the lock_* scripts (the
-- reentrant and the fair lock share them).
--
-- Keys, all in the lock's slot: l the lock value (see _lock_value.lua), q and d its queue
-- (see _queue.lua), whose members are "<hold id> <lease ms>": the lease the waiter will have.
--@include _lock_value
--@include _queue

-- set_waited makes value's hold the holder of l for lease ms while others wait, the live head's
-- liveness deadline being deadline: the value records the lease end (e) and the key lives on
-- until the next waiter's liveness deadline after it, so that it never vanishes under a live
-- waiter (see _lock_value.lua).
--@block set_waited(l, value, lease, now, deadline)
redis.call('SET', l, value .. ' w e' .. string.format('%d', now + lease), 'PX',
  string.format('%d', math.max(deadline - now, lease) + lease))
--@end

-- set_holder makes value's hold the holder of l for lease ms, dropping the ghosts and dead
-- waiters at the queue's head (see live_head), marked as set_waited says while others wait.
--@block set_holder(l, q, d, value, lease, now)
--@inline local next, s = live_head(q, d, now)
if not next then
  redis.call('SET', l, value, 'PX', lease)
else
  --@inline set_waited(l, value, lease, now, s)
end
--@end

-- keep_lock keeps the lock key l alive beyond the holder's lease, which ends wait ms from now,
-- while waiters wait: by twice the waiter timeout, renewed once less than one is left.
--@block keep_lock(l, wait, timeout)
if redis.call('PTTL', l) < wait + timeout then
  redis.call('PEXPIRE', l, wait + 2 * timeout)
end
--@end

-- grant gives the lock at l to the waiter m, already taken off the queue, whose liveness
-- deadline is deadline. The lease runs, at first, only to that deadline (if that is sooner
-- than the lease it asked for): a waiter that died a moment before its turn holds the lock no
-- longer than it would have stalled the queue, and a live one extends the lease to its own as
-- soon as it has the grant. It returns the hold id and the lease granted.
--@block grant(l, m, deadline, now, keep) -> hold, lease
local sp = string.find(m, ' ', 38, true)
hold = string.sub(m, 1, sp - 1)
-- A member of another primitive's shape (a name used for two kinds) gets the deadline.
lease = math.max(1, math.min(tonumber(string.sub(m, sp + 1)) or deadline - now, deadline - now))
-- Marked w and e whether or not others wait (cheaper than looking on this hot path: at worst
-- the next release looks at an empty queue once). The key outlives the lease by twice the
-- granted waiter's own liveness horizon, which is at least two thirds of a waiter timeout
-- while heartbeats keep time, and by keep: so the next joiner finds the key alive long
-- enough and need not extend it on every hand-off.
redis.call('SET', l, hold .. ' w e' .. string.format('%d', now + lease),
  'PX', string.format('%d', lease + math.max(2 * (deadline - now), lease, keep or 0)))
--@end

-- hand_off gives the lock at l to the live head of the queue and tells that waiter's Client
-- (see tell in _queue.lua); with no live waiter it frees the lock. It returns the hold id
-- granted, whether it is a waiter of Client from (mine: not published, the caller tells it),
-- and its lease; or nil when the lock was freed.
--@block hand_off(l, q, d, now, pub, from, keep) -> hold, mine, lease
--@inline local m, deadline = pop_live_head(q, d, now)
if not m then
  redis.call('DEL', l)
else
  --@inline hold, lease = grant(l, m, deadline, now, keep)
  local client = string.sub(hold, 1, 36)
  mine = client == from
  if not mine then
    redis.call(pub, l .. ':c:' .. client, hold)
  end
end
--@end

-- end_hold ends hold's hold of l, known to be live, and hands the lock on, as lock_release.lua
-- says (whose header says what pick, over and the riders are): to pick when it may have it,
-- else, after the riders ARGV[first_rider..] joined the queue, to the queue's live head
-- (hand_off). timeout, the riders' waiter timeout, may be a number or its string (read only
-- when riders join). reply is lock_release.lua's reply.
--@block end_hold(l, q, d, hold, now, pick, over, pub, timeout, first_rider) -> reply
local from = string.sub(hold, 1, 36)
if pick ~= '' then
  -- The pick passes the queue's live head unless this Client's streak is over and the head is
  -- another Client's. Once the pick took the lock, its own entry is a ghost: dropped too when
  -- it was the head, so that the next release finds the queue as it is.
  --@inline local head, s = live_head(q, d, now)
  local other = head and head ~= pick and string.sub(head, 1, 36) ~= from
  if over == '0' or not other then
    redis.call('ZREM', d, pick) -- queued or not: it is not a waiter any longer
    if head == pick then
      --@inline head, s = live_head(q, d, now)
    end
    local sp = string.find(pick, ' ', 38, true)
    local next, lease = string.sub(pick, 1, sp - 1), tonumber(string.sub(pick, sp + 1))
    if head then
      --@inline set_waited(l, next, lease, now, s)
    else
      redis.call('SET', l, next, 'PX', lease)
    end
    reply = {2, next, lease, 0, other and 1 or 0}
  end
end
if not reply then
  local keep = 0
  if ARGV[first_rider] then
    -- The riders join at the tail as join does, all in two calls (their hold ids are fresh:
    -- none is queued already), and the key then outlives the new holder's lease long enough
    -- for them (as a join behind a holder keeps it).
    local ms = tonumber(timeout)
    local deadline = string.format('%d', now + ms)
    local za = {}
    for i = first_rider, #ARGV do
      za[#za + 1] = deadline
      za[#za + 1] = ARGV[i]
    end
    local pushed = redis.call('RPUSH', q, unpack(ARGV, first_rider)) -- first, and undone: see queued
    --@inline queued(q, d, #ARGV - first_rider + 1, pushed, redis.pcall('ZADD', d, unpack(za)), ms)
    keep = 2 * ms
  end
  --@inline local next, mine, lease = hand_off(l, q, d, now, pub, from, keep)
  if not next then
    reply = {1}
  elseif mine then
    reply = {2, next, lease, 1, 0}
  else
    reply = {3}
  end
end
--@end

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
    if e then
      --@inline keep_lock(l, e - now, timeout)
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
  else
    --@inline keep_lock(l, e - now, timeout)
  end
end
