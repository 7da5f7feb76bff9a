-- cond_wait: a Condition's Wait: end a hold of an exclusive lock (the reentrant or the fair
-- lock) whatever its count, and queue a new hold on the condition, in one step, so that no
-- Signal can come between the release and the wait.
--
-- KEYS[1]  lock key l, KEYS[2] queue list q, KEYS[3] deadline zset d (see _lock.lua)
-- KEYS[4]  the condition's list cq, KEYS[5] its deadline zset cd: a queue as q and d are (see
--          _queue.lua), of waiters that wait for a Signal
-- ARGV[1..6] as lock_release.lua's, ARGV[2] being "1" (the hold ends)
-- ARGV[7]  the condition's new member "<new hold id> <lease ms>": the waiter's hold once
--          signalled (Signal moves it onto q, as AQS transfers a node)
-- ARGV[8..] riders, as lock_release.lua's ARGV[7..]
--
-- Replies: as lock_release.lua's ({1}, {2, ...}, {3}; {4} when the key does not hold this
-- hold, and then nothing changed: the member is not queued). It ends the hold as
-- lock_release.lua's general path does (end_hold in _lock.lua), once the member is queued on
-- cq.
--@include _lock
local l, q, d, cq, cd = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local hold, pick = ARGV[1], ARGV[5]
local v = redis.call('GET', l)
local rest = rest_of(v, hold)
if not rest then
  return {4}
end
local now = server_ms()
local e = lease_end(v)
if e and e <= now then
  return {4} -- its lease ran out: a waiter may take the lock at any moment
end
local timeout = tonumber(ARGV[4])
join(cq, cd, ARGV[7], now, timeout, true)
return end_hold(l, q, d, hold, now, pick, ARGV[6], ARGV[3], timeout, 8)
