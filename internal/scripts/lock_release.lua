-- lock_release: count one hold of an exclusive lock down, or end it and hand the lock on.
--
-- KEYS[1]  lock key l, KEYS[2] queue list q, KEYS[3] deadline zset d (see _lock.lua)
-- ARGV[1]  hold id
-- ARGV[2]  "1" to end the hold whatever its count, "0" to count one down
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[4]  waiter timeout in ms (of the riders, ARGV[7..])
-- ARGV[5]  the queue member "<hold id> <lease ms>" of a waiter of the caller's Client to hand
--          the lock to straight away when the hold ends (the reentrant lock's local
--          hand-off; the waiter may or may not be queued), or ""
-- ARGV[6]  "1" when that hand-off may not pass a waiter of another Client at the queue's live
--          head (the caller's Client had its streak of local hand-offs), "0" when it may
-- ARGV[7..] riders: members "<hold id> <lease ms>" of new waiters of the caller's Client, in
--          the order they asked, that join the queue's tail with this release, before the lock
--          is handed to the live head, when the lock does not go to ARGV[5]'s waiter
--
-- A release with no pick and no rider may leave out ARGV[4..6] (each argument costs the
-- server a string on every run, and this is also the uncontended release).
--
-- When the hold ends, the lock goes to ARGV[5]'s waiter if there is one and ARGV[6] allows
-- it; otherwise the riders join and the lock goes to the live head of the queue, whose Client
-- alone is told (see hand_off in _lock.lua); with nobody queued it is freed.
--
-- Replies (internal/scripts decodes them in DecodeRelease):
--   {0, n}            counted down: n >= 1 holds left
--   {1}               released and freed: nobody waits
--   {2, hold, lease, joined, passed}  released and handed to hold, a waiter of the caller's
--                     Client, with a lease of lease ms; nothing was published (the caller tells
--                     the waiter). joined is 1 when the riders joined the queue first, 0 when
--                     the lock went to ARGV[5]'s waiter straight away (the riders then wait for
--                     the next release); passed is 1 when it went to ARGV[5]'s waiter past a
--                     live waiter of another Client (one of a streak), else 0
--   {3}               released and handed to a waiter of another Client, which was told; the
--                     riders joined
--   {4}               the key does not hold this hold (its lease ran out, or it was taken from
--                     it): nothing changed
--   error             WRONGTYPE when the key holds a value aqs did not write
local l, q, d = KEYS[1], KEYS[2], KEYS[3]
local hold, pick, over = ARGV[1], ARGV[5] or '', ARGV[6] or '0'
local v = redis.call('GET', l)
if ARGV[2] == '1' and v then
  local riders = ARGV[7] ~= nil
  if v == hold and pick == '' and not riders then
    redis.call('DEL', l) -- the uncontended release: nobody waits (no w), nobody to hand to
    return {1}
  end
  local n = #hold
  if v == hold and pick ~= '' then
    -- The local hand-off of a lock nobody queued for since it was taken (no w): the waiter
    -- simply becomes the holder. It is not queued: a live queue entry keeps the key alive
    -- and marked (see _lock_value.lua), so a plain value has none behind it.
    local sp = string.find(pick, ' ', 38, true)
    local next, lease = string.sub(pick, 1, sp - 1), string.sub(pick, sp + 1)
    redis.call('SET', l, next, 'PX', lease)
    return {2, next, tonumber(lease), 0, 0}
  end
  if v == hold or (string.sub(v, n + 1, n + 4) == ' w e' and string.sub(v, 1, n) == hold) then
    -- The release of a contended lock: a hold as grant (in _lock.lua) writes it, with no count
    -- and no token. It ends as the general path below does (end_hold), with the block inlined
    -- before any definition is made (each costs the server a closure on every run, and this is
    -- the critical path of a contended lock).
    --@inline local now = server_ms()
    if v ~= hold and tonumber(string.sub(v, n + 5)) <= now then
      return {4} -- its lease ran out: a waiter may take the lock at any moment
    end
    --@inline local reply = end_hold(l, q, d, hold, now, pick, over, ARGV[3], ARGV[4], 7)
    return reply
  end
end
--@include _lock
local rest = rest_of(v, hold)
if not rest then
  return {4}
end
local now
local e = lease_end(v)
if e then
  now = server_ms()
  if e <= now then
    return {4} -- its lease ran out: a waiter may take the lock at any moment
  end
end
local n = hold_count(rest)
if ARGV[2] == '0' then
  if n > 1 then
    redis.call('SET', l, with_count(hold, rest, n - 1), 'KEEPTTL')
    return {0, n - 1}
  end
  return {0, 1} -- count one down from 1: the caller still holds once more than Redis knew
end
-- A hold with a count or a token ends here, the same way as above.
now = now or server_ms()
local timeout = tonumber(ARGV[4])
return end_hold(l, q, d, hold, now, pick, over, ARGV[3], timeout, 7)
