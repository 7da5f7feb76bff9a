-- _lock_value: the exclusive lock's value, a fragment included by the lock_* and fair_* scripts.
--
-- The lock key of the reentrant lock, the fair lock (and the write side of the read-write
-- lock) is a string, present only while the lock is held:
--
--   "<hold> [n<count>] [t<token>] [w]"
--
-- <hold> is the hold id (a Client id and a sequence number, fresh for every hold), n the hold
-- count when above 1, t the fencing token once one was assigned, w a mark that a release must
-- notify (a waiter of the reentrant lock) or hand off (the fair lock's queue). A fresh hold is
-- just "<hold>", which a lock takes with a plain SET NX PX and frees with one comparison: the
-- uncontended cycle costs what the minimal lock costs.
--
-- e<ms> appears while a fair lock's queue is not empty: the holder's lease end, in server
-- time, while the key itself lives longer (until waiters could have taken over). So the key
-- never vanishes under live waiters, and a newcomer's plain SET NX can never pass them; the
-- scripts judge the lease by e instead (live_value).

-- parse_value splits a value into its hold id and the rest, or raises WRONGTYPE for a value
-- aqs did not write.
local function parse_value(v)
  local hold, rest = string.match(v, '^(%x+%-%x+%-%x+%-%x+%-%x+:%d+)(.*)$')
  if not hold then
    error({err = 'WRONGTYPE the lock key holds a value aqs did not write'})
  end
  return hold, rest
end

-- server_ms is the server time in milliseconds.
local function server_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- lease_end is the lease end recorded in a value (e), or nil.
local function lease_end(v)
  return tonumber(string.match(v, ' e(%d+)'))
end

-- live_value returns v, or false when v records a lease end that has passed: the lock is free
-- then, though its key is still there. now (server ms) may be given, or is read when needed.
local function live_value(v, now)
  if v then
    local e = lease_end(v)
    if e and e <= (now or server_ms()) then
      return false
    end
  end
  return v
end

-- remaining is the holder's remaining lease in ms: to e when recorded, else the key's TTL.
-- now (server ms) may be given, or is read when needed.
local function remaining(k, v, now)
  local e = lease_end(v)
  if e then
    return e - (now or server_ms())
  end
  return redis.call('PTTL', k)
end

-- extend_lease makes the holder's lease end lease ms from now, keeping the time by which the
-- key outlives it when e is recorded.
local function extend_lease(k, v, lease)
  local e = lease_end(v)
  if not e then
    redis.call('PEXPIRE', k, lease)
    return
  end
  local now = server_ms()
  local extra = redis.call('PTTL', k) - (e - now)
  if extra < 0 then
    extra = 0
  end
  redis.call('SET', k, (string.gsub(v, ' e%d+', ' e' .. (now + lease))), 'PX', lease + extra)
end

-- hold_count is the hold count recorded in the rest of a value.
local function hold_count(rest)
  return tonumber(string.match(rest, ' n(%d+)')) or 1
end

-- with_count returns the value of hold with its count set to n.
local function with_count(hold, rest, n)
  rest = string.gsub(rest, ' n%d+', '')
  if n > 1 then
    return hold .. ' n' .. n .. rest
  end
  return hold .. rest
end
