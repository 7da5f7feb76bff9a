-- lock_acquire: take an exclusive, reentrant lock, or re-enter it.
--
-- KEYS[1]  lock key, a string: "#<token> <count> <w> <owner>" while held, "#<token>" after a
--          release (the last fencing token, kept for the rest of the key's TTL so that tokens
--          stay monotonic). w is "1" when someone may be waiting: waiters set it, and a
--          release publishes only then. One string rather than a hash, so that taking a free
--          lock is one GET and one SET ... PX: every write inside a script costs.
-- ARGV[1]  owner id (no spaces)
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
--   error WRONGTYPE when the key holds a value aqs did not write; nothing is changed
--
-- Every time comes from the server (TIME); the caller sends only durations.
local k = KEYS[1]
local v = redis.call('GET', k)
local t, n, w, o
if v then
  t, n, w, o = string.match(v, '^#(%d+) (%d+) (%d) (.+)$')
  if not t then
    t = string.match(v, '^#(%d+)$')
    if not t then
      return redis.error_reply('WRONGTYPE the lock key holds a value aqs did not write')
    end
  end
end
if o == ARGV[1] and (ARGV[3] == '' or t == ARGV[3]) then
  local held = '#' .. t .. ' ' .. (tonumber(n) + 1) .. ' ' .. w .. ' ' .. o
  local lease = tonumber(ARGV[4])
  if lease > 0 and redis.call('PTTL', k) < lease then
    redis.call('SET', k, held, 'PX', lease)
  else
    redis.call('SET', k, held, 'KEEPTTL')
  end
  return tonumber(t)
end
if ARGV[3] ~= '' then
  return 0
end
if o then
  if ARGV[5] ~= '0' and w == '0' then
    redis.call('SET', k, '#' .. t .. ' ' .. n .. ' 1 ' .. o, 'KEEPTTL')
  end
  local pttl = redis.call('PTTL', k)
  if pttl < 0 then
    pttl = 0
  end
  return -1 - pttl
end
-- The lock is free. The token is one more than the last token the key retained, or, when
-- nothing was retained, the server time in microseconds: strictly increasing while the
-- retained token lives, and still increasing after it expired, because time has moved on by
-- more than any lead the counter had over the clock.
local token
if t then
  token = tonumber(t) + 1
else
  local now = redis.call('TIME')
  token = tonumber(now[1]) * 1000000 + tonumber(now[2])
end
local mark = '0'
if ARGV[5] == '2' then
  mark = '1'
end
redis.call('SET', k, '#' .. string.format('%d', token) .. ' 1 ' .. mark .. ' ' .. ARGV[1], 'PX', ARGV[2])
return token
