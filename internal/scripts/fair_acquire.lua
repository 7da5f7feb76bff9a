-- fair_acquire: one attempt of a new hold on a fair lock, joining the wait queue on failure.
--
-- KEYS[1]  lock key (the exclusive-lock value of lock_acquire.lua: "<hold id> [n<count>]
--          [t<token>] [w]"; w means the queue is not empty, so the release must hand off)
-- KEYS[2]  queue list, KEYS[3] deadline zset (see _fair_queue.lua)
-- ARGV[1]  hold id
-- ARGV[2]  lease in ms (> 0) the hold will have, when taken now or handed over later
-- ARGV[3]  waiter timeout in ms: a waiter not heard of for this long is dropped
-- ARGV[4]  "1" to join the queue (or refresh this waiter's place) on failure, "0" not to
-- ARGV[5]  "1" to assign the fencing token now (see lock_token.lua), "0" not to
--
-- Replies:
--   >= 1   acquired; the fencing token when ARGV[5] was "1", else 1. The lock is taken only
--          when it is free and no live waiter is ahead: a newcomer never passes a live waiter.
--   < 0    not acquired; -1 - reply is how long to wait at most before trying again (the
--          holder's remaining lease, or the liveness of the waiter at the head)
--   error  WRONGTYPE when the lock key holds a value aqs did not write
--@include _fair_queue
local l, q, d = KEYS[1], KEYS[2], KEYS[3]
local hold, lease, timeout = ARGV[1], ARGV[2], tonumber(ARGV[3])
local member = hold .. ' ' .. lease
local now = now_ms()
local v = redis.call('GET', l)
local head
if v then
  holder_of(v)
else
  head = live_head(q, d, now)
  if not head or head == member then
    if head then
      redis.call('LPOP', q)
      redis.call('ZREM', d, member)
    end
    local value, reply = hold, 1
    if ARGV[5] == '1' then
      local t = redis.call('TIME')
      reply = tonumber(t[1]) * 1000000 + tonumber(t[2])
      value = value .. ' t' .. string.format('%d', reply)
    end
    if redis.call('LLEN', q) > 0 then
      value = value .. ' w'
    end
    redis.call('SET', l, value, 'PX', lease)
    return reply
  end
end
if ARGV[4] == '1' then
  if redis.call('ZADD', d, now + timeout, member) == 1 then
    redis.call('RPUSH', q, member)
  end
  redis.call('PEXPIRE', q, 2 * timeout)
  redis.call('PEXPIRE', d, 2 * timeout)
  if v and not string.find(v, ' w', 1, true) then
    redis.call('SET', l, v .. ' w', 'KEEPTTL')
  end
end
local wait
if v then
  wait = redis.call('PTTL', l)
else
  wait = tonumber(redis.call('ZSCORE', d, head)) - now
end
if wait < 0 then
  wait = 0
end
return -1 - wait
