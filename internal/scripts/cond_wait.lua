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
-- hold, and then nothing changed: the member is not queued). It is lock_release.lua's general
-- path, with the member queued on cq once the hold is known to be live.
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
local first = pick ~= '' and live_head(q, d, now)
local other = first and first ~= pick and string.sub(first, 1, 36) ~= string.sub(hold, 1, 36)
if pick ~= '' and (ARGV[6] == '0' or not other) then
  local sp = string.find(pick, ' ', 38, true)
  local next, lease = string.sub(pick, 1, sp - 1), tonumber(string.sub(pick, sp + 1))
  redis.call('ZREM', d, pick)
  set_holder(l, q, d, next, lease, now)
  return {2, next, lease, 0, other and 1 or 0}
end
local keep = 0
if ARGV[8] then
  for i = 8, #ARGV do
    join(q, d, ARGV[i], now, timeout, true)
  end
  keep = 2 * timeout
end
local next, mine, lease = hand_off(l, q, d, now, ARGV[3], string.sub(hold, 1, 36), keep)
if not next then
  return {1}
end
if mine then
  return {2, next, lease, 1, 0}
end
return {3}
