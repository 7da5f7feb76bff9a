-- cond_signal: a Condition's Signal or SignalAll: move the longest waiting live waiter of the
-- condition (or all of them, in order) onto the lock's queue, at its tail, as AQS transfers a
-- node; a free lock goes to the queue's live head at once.
--
-- KEYS[1]  lock key l, KEYS[2] queue list q, KEYS[3] deadline zset d (see _lock.lua)
-- KEYS[4]  the condition's list cq, KEYS[5] its deadline zset cd (see cond_wait.lua)
-- ARGV[1]  "1" to move one waiter, "0" to move all
-- ARGV[2]  waiter timeout in ms: the moved waiters' liveness on q starts at now + it
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[4]  the caller's Client id: a grant to one of its waiters is not published but returned
--
-- Replies: {moved, hold}: how many waiters moved, and the hold id the lock was handed to when
-- it is a waiter of the caller's Client (for the caller to tell), else "".
--@include _lock
local l, q, d, cq, cd = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local timeout = tonumber(ARGV[2])
local now = server_ms()
local moved = transfer(cq, cd, q, d, now, timeout, ARGV[1] == '1')
if moved == 0 then
  return {0, ''}
end
local v = live_value(redis.call('GET', l), now)
if not v then
  local next, mine = hand_off(l, q, d, now, ARGV[3], ARGV[4], 0)
  if next and mine then
    return {moved, next}
  end
  return {moved, ''}
end
-- Behind a holder: mark the lock, as lock_acquire.lua's join does.
local e = lease_end(v)
mark_waited(l, v, e, now, e and e - now or math.max(1, redis.call('PTTL', l)), timeout)
return {moved, ''}
