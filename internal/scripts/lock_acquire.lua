-- lock_acquire: take an exclusive lock for a new hold (a waiter's attempt, or a TryLock).
--
-- The lock key is a string, present only while the lock is held:
--
--   "<hold> [n<count>] [t<token>] [w]"
--
-- <hold> is the hold id (a Client id and a sequence number, fresh for every hold), n the hold
-- count when above 1, t the fencing token once one was assigned, w a mark left by a waiter so
-- that the release publishes. A fresh hold is just "<hold>", which the Go side takes with a
-- plain SET NX PX when it can, and which lock_release frees with one comparison: the
-- uncontended cycle costs what the minimal SET NX / compare-and-delete lock costs.
--
-- KEYS[1]  lock key
-- ARGV[1]  hold id
-- ARGV[2]  lease in ms (> 0)
-- ARGV[3]  mode: "0" the caller will not wait; "1" it waits (a failed attempt sets w);
--          "2" it waits and other waiters of its Client wait too (w is set whatever the
--          outcome, so the next release wakes them)
-- ARGV[4]  "1" to assign the fencing token now (see lock_token.lua), "0" to leave it for later
--
-- Replies:
--   >= 1   acquired; the fencing token when ARGV[4] was "1", else 1
--   < 0    held by another hold; -1 - reply is its remaining lease in ms
--   error  WRONGTYPE when the key holds a value aqs did not write; nothing is changed
local k = KEYS[1]
local v = redis.call('GET', k)
if not v then
  local value, reply = ARGV[1], 1
  if ARGV[4] == '1' then
    local now = redis.call('TIME')
    reply = tonumber(now[1]) * 1000000 + tonumber(now[2])
    value = value .. ' t' .. string.format('%d', reply)
  end
  if ARGV[3] == '2' then
    value = value .. ' w'
  end
  redis.call('SET', k, value, 'PX', ARGV[2])
  return reply
end
local hold, rest = string.match(v, '^(%x+%-%x+%-%x+%-%x+%-%x+:%d+)(.*)$')
if not hold then
  return redis.error_reply('WRONGTYPE the lock key holds a value aqs did not write')
end
if ARGV[3] ~= '0' and not string.find(rest, ' w', 1, true) then
  redis.call('SET', k, v .. ' w', 'KEEPTTL')
end
local pttl = redis.call('PTTL', k)
if pttl < 0 then
  pttl = 0
end
return -1 - pttl
