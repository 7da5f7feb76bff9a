-- lock_release: count one hold of an exclusive lock down, or end the hold.
--
-- KEYS[1]  lock key (see lock_acquire.lua)
-- ARGV[1]  hold id
-- ARGV[2]  "1" to end the hold whatever its count (the caller's last acquisition), "0" to
--          count one down
-- ARGV[3]  publish command, used only when a waiter marked the lock: PUBLISH, or SPUBLISH on
--          Redis Cluster; the channel is KEYS[1] .. ":ch"
-- ARGV[4]  optional: the hold id of a waiter of the caller's Client to hand the lock to when
--          the hold ends (a local hand-off: see internal/core/pick.go), with
-- ARGV[5]  its lease in ms, and
-- ARGV[6]  "1" when the caller's Client has handed the lock on among its own waiters
--          maxLocalHandOffs times in a row (reentrant/lock.go), "0" otherwise
--
-- Turns between Clients. A waiter of another Client than the holder's queues its Client in
-- the value's r field (lock_acquire.lua). Then a local hand-off keeps the queue, and once the
-- caller's streak is over (or it has no waiter left) the hold does not end in a plain DEL,
-- which the caller's own next Lock would win again at once before any waiter elsewhere hears
-- of it: the lock is reserved for the Client at the head of the queue, for RESERVE ms at most,
-- as the key "<that Client's id>:r w [r<the rest of the queue>]", with the caller's Client
-- queued at the tail when it has waiters (it picked one), and "r<that Client's id>" is
-- published: that Client wakes a waiter, which takes the reserved lock as a free one; the
-- other Clients wake nobody (internal/core/hub.go's deliver), since everyone but that
-- Client finds the lock held (their failed attempts would queue their Clients behind). So
-- the Clients whose waiters wait take turns in the order they came, and a waiter in another
-- process waits at most one turn of every Client ahead of its own. If the reserved Client
-- does not take the lock (its waiters are gone), the reservation expires with the queue,
-- and the other Clients, which wake a waiter a moment after the reservation would have run
-- out unless another message came, try again and queue again.

-- Replies:
--   n >= 1  holds left
--   0       released; if a waiter had marked the lock (w), "1" (wake one) was published, or
--           reserved for another Client's turn, and "r<its id>" published
--   -2      released and handed to ARGV[4], marked w (so that its release wakes the others
--           that may wait), with the queue of turns (r) if there was one; nothing was
--           published
--   -1      the key does not hold this hold; nothing changed
--
-- The common release, of a fresh hold nobody waits for, is the first comparison: the same
-- work as the minimal compare-and-delete lock.
local k = KEYS[1]
local v = redis.call('GET', k)
if v == ARGV[1] and ARGV[2] == '1' then
  if ARGV[4] then
    redis.call('SET', k, ARGV[4] .. ' w', 'PX', ARGV[5])
    return -2
  end
  redis.call('DEL', k)
  return 0
end
--@include _lock_value
if not v or string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. ' ' then
  if v == ARGV[1] then
    return 1 -- count one down from 1: the caller still holds once more than Redis knew
  end
  return -1
end
local rest = string.sub(v, #ARGV[1] + 1)
local n = hold_count(rest)
if ARGV[2] == '0' and n > 1 then
  redis.call('SET', k, with_count(ARGV[1], rest, n - 1), 'KEEPTTL')
  return n - 1
end
local ids = turns(rest)
if ARGV[4] and not (ids ~= '' and ARGV[6] == '1') then
  redis.call('SET', k, ARGV[4] .. ' w' .. turns_field(ids), 'PX', ARGV[5])
  return -2
end
local own = string.sub(ARGV[1], 1, 36)
if string.sub(ids, 1, 36) == own then
  ids = string.sub(ids, 37) -- never queued behind its own hold; dropped all the same
end
if ids ~= '' then
  local RESERVE = 20
  local head, rest = string.sub(ids, 1, 36), string.sub(ids, 37)
  if ARGV[4] and not string.find(rest, own, 1, true) then
    rest = rest .. own -- the caller's Client has waiters: its turn comes after the others'
  end
  redis.call('SET', k, head .. ':r w' .. turns_field(rest), 'PX', RESERVE)
  redis.call(ARGV[3], k .. ':ch', 'r' .. head)
  return 0
end
redis.call('DEL', k)
if string.find(rest, ' w', 1, true) then
  redis.call(ARGV[3], k .. ':ch', '1')
end
return 0
