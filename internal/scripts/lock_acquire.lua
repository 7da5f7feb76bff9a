-- lock_acquire: one attempt of a new hold on an exclusive lock (the reentrant or the fair
-- lock), joining the wait queue on failure.
--
-- KEYS[1]  lock key l (see _lock_value.lua); KEYS[2] queue list q, KEYS[3] deadline zset d
--          (see _queue.lua and _lock.lua)
-- ARGV[1]  hold id
-- ARGV[2]  lease in ms (> 0) the hold will have, when taken now or handed over later
-- ARGV[3]  waiter timeout in ms: a waiter not heard of for this long is dropped
-- ARGV[4]  "1" to join the queue (or refresh this waiter's place) on failure, "0" not to
-- ARGV[5]  "1" to assign the fencing token now (see lock_token.lua), "0" not to
-- ARGV[6]  "1" for the hold's first attempt (it cannot be queued already), "0" for a later one
-- ARGV[7]  "1" when a first attempt that finds the lock held by another hold of the caller's
--          Client is not to join the queue: it waits for that hold's release, which the
--          caller's Client sends and which may hand the lock to it (the reentrant lock's local
--          hand-off); "0" (or absent) to join as any waiter
-- ARGV[8]  publish command: PUBLISH (the default), or SPUBLISH on Redis Cluster
--
-- The lock is taken only when it is free and no live waiter is ahead: a newcomer never
-- passes a live waiter. A free lock kept for a live head that is not the caller is handed to
-- that head (and published to its Client) before the caller queues. (The reentrant lock's only barging is its local hand-off, which
-- happens in lock_release.lua.)
--
-- Replies, {status, value} (the statuses of every attempt script; internal/scripts decodes
-- them in DecodeAttempt):
--   {1, token}  acquired; the fencing token when ARGV[5] was "1", else 0
--   {2, 0}      this hold has the lock already, handed over by a release (or taken by its
--               heartbeat) whose message it missed; its lease may be a grant's short one
--   {3, ms}     queued: wait at most ms (the holder's remaining lease) before trying again
--               without a message
--   {3, ms, n}  the same, for a hold's first attempt (ARGV[6] "1"), which joined: n is the
--               length of the queue's list after the join (the waiters ahead, this one, and
--               entries of waiters that left and are not dropped yet), for the Client's
--               observer
--   {4, ms}     not acquired and not queued (ARGV[4] "0"); ms as for 3
--   {8, ms}     not acquired and not queued (ARGV[7] "1"): another hold of the caller's Client
--               holds the lock, for at most ms more
--   {5, 0}      this waiter is no longer queued (its deadline passed before it was heard of
--               again, or it was granted the lock and its lease ran out before it knew): it
--               must start over, under a new hold id (see join in _queue.lua)
--   error       WRONGTYPE when a key holds a value aqs did not write
local l, q, d = KEYS[1], KEYS[2], KEYS[3]
local hold, lease = ARGV[1], ARGV[2]
local v = redis.call('GET', l)
if v and ARGV[7] == '1' and string.sub(v, 1, 37) == string.sub(hold, 1, 37) and
    string.byte(v, 37) == 58 and string.byte(v, 9) == 45 then
  -- Held by a hold of the caller's Client (its id shares the Client id and the colon; a
  -- first attempt's hold id is fresh, so it is another hold): alive while its lease lasts.
  local i = string.find(v, ' e', 38, true)
  if not i then
    return {8, math.max(1, redis.call('PTTL', l))}
  end
  --@inline local now = server_ms()
  local wait = tonumber(string.sub(v, i + 2)) - now
  if wait > 0 then
    return {8, wait}
  end
end
if v and ARGV[4] == '1' and ARGV[6] == '1' then
  -- A newcomer joining behind a holder that others wait for already (its value records its
  -- lease end: " e<ms>", the last field): the arrival at a contended lock, which joins as the
  -- general path below does (join and mark_waited), with the fragments' blocks inlined before
  -- any definition is made (each costs the server a closure on every run). Nothing is written
  -- unless it goes this way to the end.
  local i = string.find(v, ' e', 38, true)
  if i and string.byte(v, 37) == 58 and string.byte(v, 9) == 45 and
      string.sub(v, 1, #hold + 1) ~= hold .. ' ' then
    --@inline local now = server_ms()
    local wait = tonumber(string.sub(v, i + 2)) - now
    local timeout = tonumber(ARGV[3])
    if wait > 0 then
      --@inline local pushed = join_fresh(q, d, hold .. ' ' .. lease, string.format('%d', now + timeout), timeout)
      --@inline keep_lock(l, wait, timeout)
      return {3, wait, pushed}
    end
  end
end
if not v and ARGV[5] ~= '1' and redis.call('EXISTS', q) == 0 then
  -- The uncontended path, before any definition is made (each costs the server a closure on
  -- every run): free, and nobody queued (an empty list does not exist). take(nil) below,
  -- without a fencing token.
  redis.call('SET', l, hold, 'PX', lease)
  return {1, 0}
end
--@include _lock
local timeout = tonumber(ARGV[3])

-- take makes hold the holder; value and reply carry the fencing token when one is asked for.
local function take(now)
  local value, token = hold, 0
  if ARGV[5] == '1' then
    local field
    token, field = new_token()
    value = value .. field
  end
  if now then
    set_holder(l, q, d, value, tonumber(lease), now)
  else
    redis.call('SET', l, value, 'PX', lease)
  end
  return {1, token}
end

local e, now
if v then
  if not looks_ours(v) then
    wrong_type()
  end
  e = lease_end(v)
  if e then
    now = server_ms()
    if e <= now then
      v = false -- the holder's lease ran out: the lock is free, kept for the queue's head
    end
  end
  if v and owns(v, hold) then
    return {2, 0} -- handed over earlier: the caller treats it as the grant it missed
  end
end
if not v and redis.call('EXISTS', q) == 0 then
  return take(nil) -- the uncontended path with a fencing token: free, and nobody queued
end
local member = hold .. ' ' .. lease
now = now or server_ms()
if not v then
  local head = live_head(q, d, now)
  if not head or head == member then
    if head then
      redis.call('LPOP', q)
      redis.call('ZREM', d, member)
    end
    return take(now)
  end
  -- The lock is free and kept for the live head, another waiter (the holder's lease ran
  -- out): it is handed to the head now, as a release would have, rather than left for the
  -- head's own attempt, heartbeat or deadline. A head whose Client no longer waits for it (a
  -- failover brought back the entry of a call that ended) is given back by that Client at
  -- once (internal/core/orphan.go), and the lock goes on to the next.
  hand_off(l, q, d, now, ARGV[8] or 'PUBLISH')
  v = redis.call('GET', l)
  e = lease_end(v)
end
local wait
if e then
  wait = e - now
else
  wait = redis.call('PTTL', l)
end
if wait < 1 then
  wait = 1
end
if ARGV[4] ~= '1' then
  return {4, wait}
end
if not join(q, d, member, now, timeout, ARGV[6] == '1') then
  return {5, 0}
end
if v then
  mark_waited(l, v, e, now, wait, timeout)
end
if ARGV[6] == '1' then
  return {3, wait, redis.call('LLEN', q)}
end
return {3, wait}
