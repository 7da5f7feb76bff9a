-- lock_acquire: take an exclusive, reentrant lock, or re-enter it.
--
-- KEYS[1]  lock hash: o = owner id, n = hold count, t = fencing token, w = "someone may be
--          waiting" (set by waiters, read and cleared by the release, which publishes only
--          then). After a release the hash keeps only t, for the rest of its TTL, so that
--          tokens stay monotonic.
-- ARGV[1]  owner id
-- ARGV[2]  lease in ms for a new hold (> 0)
-- ARGV[3]  expected token when the caller re-enters a hold it believes it has, or "" to take
--          the lock (or re-enter it when this owner already holds it)
-- ARGV[4]  lease in ms for a re-entry: 0 leaves the expiry alone, > 0 extends the lease to at
--          least this (a re-entry never shortens a lease)
-- ARGV[5]  waiting mode: "0" the caller will not wait; "1" it waits (a failed attempt sets
--          w); "2" it waits and other waiters of its Client wait too (w is set whatever the
--          outcome, so the next release wakes them)
--
-- Replies (one integer, cheap to build and to parse):
--   >= 1  acquired, a new hold or a re-entry; the value is the hold's fencing token
--   0     ARGV[3] was given and this owner no longer holds the lock with that token: the hold
--         was lost
--   < 0   held by another owner; -1 - reply is its remaining lease in ms
--
-- Every time comes from the server (TIME); the caller sends only durations.
local h = KEYS[1]
local cur = redis.call('HMGET', h, 'o', 't')
if cur[1] == ARGV[1] and (ARGV[3] == '' or cur[2] == ARGV[3]) then
  redis.call('HINCRBY', h, 'n', 1)
  local lease = tonumber(ARGV[4])
  if lease > 0 and redis.call('PTTL', h) < lease then
    redis.call('PEXPIRE', h, lease)
  end
  return tonumber(cur[2])
end
if ARGV[3] ~= '' then
  return 0
end
if cur[1] then
  if ARGV[5] ~= '0' then
    redis.call('HSET', h, 'w', 1)
  end
  local pttl = redis.call('PTTL', h)
  if pttl < 0 then
    pttl = 0
  end
  return -1 - pttl
end
-- The lock is free. The token is one more than the last token the hash retained, or, when
-- nothing was retained, the server time in microseconds: strictly increasing while the
-- retained t lives, and still increasing after it expired, because time has moved on by more
-- than any lead t had over the clock.
local token = tonumber(cur[2])
if token then
  token = token + 1
else
  local now = redis.call('TIME')
  token = tonumber(now[1]) * 1000000 + tonumber(now[2])
end
local t = string.format('%d', token)
if ARGV[5] == '2' then
  redis.call('HSET', h, 'o', ARGV[1], 'n', 1, 't', t, 'w', 1)
else
  redis.call('HSET', h, 'o', ARGV[1], 'n', 1, 't', t)
end
redis.call('PEXPIRE', h, ARGV[2])
return token
