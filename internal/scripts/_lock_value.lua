-- _lock_value: the exclusive lock's value, a fragment included by the lock_* and rw_* scripts.
--
-- The lock key of the reentrant lock, the fair lock and the write side of the read-write lock
-- is a string, present only while the lock is held (or kept for the head of its queue):
--
--   "<hold> [n<count>] [t<token>] [w] [e<ms>]"
--
-- <hold> is the hold id (a Client id, which is a UUID, a colon and a sequence number, fresh
-- for every hold), n the hold count when above 1, t the fencing token once one was assigned,
-- w a mark that the queue may hold waiters, so that the release must hand the lock off. The
-- fields after the hold id come in any order, except that e is always the last. A fresh hold
-- is just "<hold>", which a lock takes with a plain SET NX PX and frees with one comparison:
-- the uncontended cycle costs what the minimal lock costs. internal/layout parses the same
-- value in Go.
--
-- e<ms> appears while the queue is not empty: the holder's lease end, in server time, while
-- the key itself lives longer (until waiters could have taken over). So the key never
-- vanishes under live waiters, and a newcomer's plain SET NX can never pass them; the scripts
-- judge the lease by e instead (live_value).
--
-- These helpers run on every lock operation, so they use plain finds and substrings: a Lua
-- pattern match costs as much as a Redis command, a plain find a fifth.
--@include _time

-- looks_ours reports whether a value has the shape of an aqs value: its hold id starts with a
-- UUID ('-' at 9, ':' at 37 after the 36 characters of the Client id). Checked before any
-- write to a key that holds a value, so that a foreign value is reported, never overwritten.
local function looks_ours(v)
  return string.byte(v, 37) == 58 and string.byte(v, 9) == 45
end

local function wrong_type()
  error({err = 'WRONGTYPE the lock key holds a value aqs did not write'})
end

-- parse_value splits a value into its hold id and the rest, or raises WRONGTYPE for a value
-- aqs did not write.
local function parse_value(v)
  if not looks_ours(v) then
    wrong_type()
  end
  local sp = string.find(v, ' ', 38, true)
  if not sp then
    return v, ''
  end
  return string.sub(v, 1, sp - 1), string.sub(v, sp)
end

-- owns reports whether v is hold's value.
local function owns(v, hold)
  return v == hold or (string.byte(v, #hold + 1) == 32 and string.sub(v, 1, #hold) == hold)
end

-- rest_of returns the rest of v after hold when v is hold's value ('' for a bare hold), or
-- nil when it is another hold's (or nil). It raises WRONGTYPE for a value aqs did not write.
local function rest_of(v, hold)
  if not v then
    return nil
  end
  if v == hold then
    return ''
  end
  if owns(v, hold) then
    return string.sub(v, #hold + 1)
  end
  if not looks_ours(v) then
    wrong_type()
  end
  return nil
end

-- new_token returns a fresh fencing token, the server time in microseconds (see
-- lock_token.lua), and the value field that records it.
local function new_token()
  local t = redis.call('TIME')
  local token = tonumber(t[1]) * 1000000 + tonumber(t[2])
  return token, ' t' .. string.format('%d', token)
end

-- lease_end is the lease end recorded in a value (e), or nil. e is always the last field.
local function lease_end(v)
  local i = string.find(v, ' e', 38, true)
  if i then
    return tonumber(string.sub(v, i + 2))
  end
  return nil
end

-- live_value returns v, or false when v records a lease end that has passed: the lock is free
-- then, though its key is still there. It raises WRONGTYPE for a value aqs did not write. now (server ms) may be given, or is read when needed.
local function live_value(v, now)
  if v then
    if not looks_ours(v) then
      wrong_type()
    end
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

-- without_end returns v without its e field.
local function without_end(v)
  local i = string.find(v, ' e', 38, true)
  if i then
    return string.sub(v, 1, i - 1)
  end
  return v
end

-- with_field returns v with a field (" w", " t<token>") added before its e field, which stays
-- the last.
local function with_field(v, field)
  local i = string.find(v, ' e', 38, true)
  if i then
    return string.sub(v, 1, i - 1) .. field .. string.sub(v, i)
  end
  return v .. field
end

-- with_end returns v with its lease end set to e (ms).
local function with_end(v, e)
  return without_end(v) .. ' e' .. string.format('%d', e)
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
  redis.call('SET', k, with_end(v, now + lease), 'PX', lease + extra)
end

-- hold_count is the hold count recorded in the rest of a value.
local function hold_count(rest)
  local i = string.find(rest, ' n', 1, true)
  if not i then
    return 1
  end
  local j = string.find(rest, ' ', i + 2, true)
  return tonumber(string.sub(rest, i + 2, j and j - 1))
end

-- with_count returns the value of hold with its count set to n (rest is the rest of its
-- current value).
local function with_count(hold, rest, n)
  local i = string.find(rest, ' n', 1, true)
  if i then
    local j = string.find(rest, ' ', i + 2, true)
    rest = j and string.sub(rest, j) or ''
  end
  if n > 1 then
    return hold .. ' n' .. n .. rest
  end
  return hold .. rest
end
