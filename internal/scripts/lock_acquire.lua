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
-- Turns between Clients (see lock_release.lua). A failed attempt of a waiter (mode 1 or 2) of
-- another Client than the holder's puts its Client at the tail of the value's turn queue (r),
-- unless it is there already or the queue is full (MAX_TURNS Clients: the attempt then
-- replies a remaining lease of OVERFLOW_RETRY ms at most, so that the waiter tries again
-- soon for a place, since no turn message is meant for its Client). A lock reserved for a Client
-- ("<Client id>:r w [r<queue>]", see lock_release.lua) is taken as a free one by a waiter of
-- that Client, which keeps the rest of the queue; to everyone else, newcomers and waiters of
-- every other Client, it is held, and their failed attempts queue their Clients behind it.
--@include _lock_value
local MAX_TURNS = 32
local OVERFLOW_RETRY = 30
local overflow = false
local k = KEYS[1]

-- take sets the lock to this hold with the given fields after it (and its token when asked
-- for), and returns the reply.
local function take(fields)
  local value, reply = ARGV[1], 1
  if ARGV[4] == '1' then
    local field
    reply, field = new_token()
    value = value .. field
  end
  redis.call('SET', k, value .. fields, 'PX', ARGV[2])
  return reply
end

local v = redis.call('GET', k)
if not v then
  if ARGV[3] == '2' then
    return take(' w')
  end
  return take('')
end
local hold, rest = parse_value(v)
if hold == ARGV[1] then
  return 2
end
local client = string.sub(ARGV[1], 1, 36)
local holder = string.sub(hold, 1, 36)
if ARGV[3] ~= '0' then
  local ids, i, j = turns(rest)
  if holder == client and string.sub(hold, 38) == 'r' then
    -- Reserved for this Client's waiters: taken as a free lock, marked w for the release to
    -- wake the waiters this Client may still have, with the queue of the Clients after it.
    return take(' w' .. turns_field(ids))
  end
  -- w: the release must wake a waiter; r: the queue of other Clients' turns.
  local marked = string.find(rest, ' w', 1, true)
  local queue = holder ~= client and not string.find(ids, client, 1, true)
  if queue and #ids >= 36 * MAX_TURNS then
    -- No room in the queue: this waiter tries again within OVERFLOW_RETRY ms (the one case
    -- where a waiter polls), rather than wait for a wakeup that only its turn would bring.
    queue, overflow = false, true
  end
  if queue then
    if i then
      rest = string.sub(rest, 1, i - 1) .. turns_field(ids .. client) .. (j and string.sub(rest, j) or '')
    else
      rest = rest .. turns_field(client)
    end
  end
  if not marked then
    rest = rest .. ' w'
  end
  if queue or not marked then
    redis.call('SET', k, hold .. rest, 'KEEPTTL')
  end
end
local pttl = redis.call('PTTL', k)
if pttl < 0 then
  pttl = 0
end
if overflow and pttl > OVERFLOW_RETRY then
  pttl = OVERFLOW_RETRY
end
return -1 - pttl
