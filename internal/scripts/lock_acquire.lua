-- lock_acquire: take an exclusive lock for a new hold (a waiter's attempt, or a TryLock).
--
-- The lock key's value is described in _lock_value.lua.
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
--   2      this hold has the lock already: a release handed it over (lock_release.lua's
--          local hand-off) and the caller has not heard yet (a token is never 2: tokens are
--          server times in microseconds)
--   < 0    held by another hold; -1 - reply is its remaining lease in ms
--   error  WRONGTYPE when the key holds a value aqs did not write; nothing is changed
--
-- A failed attempt of a waiter of another Client than the holder's also marks the lock r; a
-- lock reserved for such waiters ("<Client id>:r w", see lock_release.lua) is taken as a
-- free one by a waiter (mode 1 or 2) of any other Client, marked w r; it is held for the
-- reserving Client's and for newcomers (mode 0).
--@include _lock_value
local k = KEYS[1]
local v = redis.call('GET', k)
if not v then
  local value, reply = ARGV[1], 1
  if ARGV[4] == '1' then
    local field
    reply, field = new_token()
    value = value .. field
  end
  if ARGV[3] == '2' then
    value = value .. ' w'
  end
  redis.call('SET', k, value, 'PX', ARGV[2])
  return reply
end
local hold, rest = parse_value(v)
if hold == ARGV[1] then
  return 2
end
local client = string.sub(ARGV[1], 1, 36)
local other = string.sub(hold, 1, 36) ~= client
if other and ARGV[3] ~= '0' and string.sub(hold, 38) == 'r' then
  -- Reserved for the waiters of Clients other than the releaser's (lock_release.lua): a
  -- waiter of another Client takes it as a free lock, marked for the waiters the releaser's
  -- Client still has. To a newcomer's first attempt (this one with mode 0, or a plain SET NX)
  -- it is held.
  local value, reply = ARGV[1], 1
  if ARGV[4] == '1' then
    local field
    reply, field = new_token()
    value = value .. field
  end
  redis.call('SET', k, value .. ' w r', 'PX', ARGV[2])
  return reply
end
if ARGV[3] ~= '0' then
  -- w: the release must wake a waiter; r: one of another Client than the holder's waits.
  local marks = ''
  if not string.find(rest, ' w', 1, true) then
    marks = ' w'
  end
  if other and not string.find(rest, ' r', 1, true) then
    marks = marks .. ' r'
  end
  if marks ~= '' then
    redis.call('SET', k, with_field(v, marks), 'KEEPTTL')
  end
end
local pttl = redis.call('PTTL', k)
if pttl < 0 then
  pttl = 0
end
return -1 - pttl
