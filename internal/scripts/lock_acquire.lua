-- lock_acquire: take an exclusive, reentrant lock (or re-enter it, when this owner holds it).
--
-- KEYS[1]  lock key, a string: "#<token> <count> <w> <owner>" while held, "#<token>" after a
--          release (the last fencing token, kept for the rest of the key's TTL so that tokens
--          stay monotonic). w is "1" when someone may be waiting: waiters set it, and a
--          release publishes only then. One string rather than a hash, and the caller sends
--          the tail of the new value ready-made, because this is the hot path: every call and
--          every argument of a script costs (about a native command per write).
-- ARGV[1]  " 1 <w> <owner>": the value of a new hold after its token; w is "1" when other
--          waiters of the caller's Client wait too (so the next release wakes them)
-- ARGV[2]  lease in ms (> 0): the lease of a new hold
-- ARGV[3]  mode: "0" the caller will not wait, "1" it waits (a failed attempt sets w); plus 2
--          when the lease is fixed (then a re-entry extends the lease to at least ARGV[2])
--
-- Replies (one integer, cheap to build and to parse):
--   >= 1  acquired, a new hold or a re-entry; the value is the hold's fencing token
--   < 0   held by another owner; -1 - reply is its remaining lease in ms
--   error WRONGTYPE when the key holds a value aqs did not write; nothing is changed
--
-- Every time comes from the server (TIME); the caller sends only durations.
local k = KEYS[1]
local v = redis.call('GET', k)
local token
if not v then
  local now = redis.call('TIME')
  token = tonumber(now[1]) * 1000000 + tonumber(now[2])
elseif not string.find(v, ' ', 1, true) then
  -- Free, with the last token retained: the next one is one more. Tokens are strictly
  -- increasing while the retained token lives, and still increasing after it expired,
  -- because server time has moved on by more than any lead the counter had over it.
  if string.byte(v) == 35 then -- '#'
    token = tonumber(string.sub(v, 2))
  end
  if not token then
    return redis.error_reply('WRONGTYPE the lock key holds a value aqs did not write')
  end
  token = token + 1
else
  local t, n, w, o = string.match(v, '^#(%d+) (%d+) (%d) (.+)$')
  if not t then
    return redis.error_reply('WRONGTYPE the lock key holds a value aqs did not write')
  end
  local mode = tonumber(ARGV[3])
  if o == string.sub(ARGV[1], 6) then
    -- Re-entry by the same owner.
    local held = '#' .. t .. ' ' .. (tonumber(n) + 1) .. ' ' .. w .. ' ' .. o
    local lease = tonumber(ARGV[2])
    if mode >= 2 and redis.call('PTTL', k) < lease then
      redis.call('SET', k, held, 'PX', lease)
    else
      redis.call('SET', k, held, 'KEEPTTL')
    end
    return tonumber(t)
  end
  if mode % 2 == 1 and w == '0' then
    redis.call('SET', k, '#' .. t .. ' ' .. n .. ' 1 ' .. o, 'KEEPTTL')
  end
  local pttl = redis.call('PTTL', k)
  if pttl < 0 then
    pttl = 0
  end
  return -1 - pttl
end
redis.call('SET', k, '#' .. string.format('%d', token) .. ARGV[1], 'PX', ARGV[2])
return token
