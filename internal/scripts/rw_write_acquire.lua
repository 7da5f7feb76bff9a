-- rw_write_acquire: one attempt of a new write hold on a read-write lock, joining the wait
-- queue on failure.
--
-- KEYS[1] w, KEYS[2] r, KEYS[3] rn, KEYS[4] q, KEYS[5] d (see _rw.lua)
-- ARGV[1]  hold id
-- ARGV[2]  lease in ms (> 0)
-- ARGV[3]  waiter timeout in ms
-- ARGV[4]  "1" to join the queue (or keep this waiter's place) on failure, "0" not to
-- ARGV[5]  "1" to assign the fencing token now (see lock_token.lua), "0" not to
-- ARGV[6]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[7]  "1" for the hold's first attempt (it cannot be queued already), "0" for a later one
--
-- The write side is taken only when no writer holds, no reader's lease runs and no live
-- waiter is queued ahead (writers and readers alike: see _rw.lua). The attempt first serves
-- the queue when no writer holds, as a release would have (a head whose turn came without a
-- release: its predecessors' leases ran out, or they gave up).
--
-- Replies: {status, value, hold ids granted to waiters of the caller's Client (not
-- published)...}, with the statuses of lock_acquire.lua: {1, token or 0} acquired; {2, 0}
-- this hold has the write side already (granted while it waited, or this attempt run twice);
-- {3, ms} queued, {4, ms} not acquired and not queued, ms being how long to wait at most
-- before trying again without a message; {5, 0} no longer queued (dropped as dead, or granted
-- and its lease ran out before it knew), start over under a new hold id. Error WRONGTYPE
-- when w holds a value aqs did not write.
local v = redis.call('GET', KEYS[1])
if not v and ARGV[7] == '1' and ARGV[5] ~= '1' and redis.call('EXISTS', KEYS[2], KEYS[3], KEYS[4], KEYS[5]) == 0 then
  -- The uncontended path, before any definition is made (each costs the server a closure on
  -- every run), for a fresh hold without a fencing token (it cannot be queued already): no
  -- writer, no reader (not even one whose lease ran out) and no queue key (not even one of
  -- another type, which the general path reports).
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1, 0}
end
--@include _rw
local w, r, rn, q, d = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local hold, timeout = ARGV[1], tonumber(ARGV[3])
local from = string.sub(hold, 1, 36)
local now = server_ms()
if v and parse_value(v) == hold then
  return {2, 0}
end
local mine = {}
if not v then
  local granted = serve(w, r, q, d, now)
  local ours = take_out(granted, hold)
  mine = tell(granted, w, ARGV[6], from)
  if ours then
    return attempt_reply(2, 0, mine)
  end
  v = redis.call('GET', w)
end
local wait
if v then
  wait = redis.call('PTTL', w)
else
  local e = live_first(r, now)
  if e then
    wait = e - now
  else
    -- No writer, no live reader, and the queue served: nobody is ahead. What is left in r
    -- and rn belongs to readers whose leases ran out. HLEN first: a key of another type at rn
    -- is reported (WRONGTYPE), not deleted.
    if redis.call('HLEN', rn) > 0 then
      redis.call('DEL', r, rn)
    else
      redis.call('DEL', r)
    end
    redis.call('ZREM', d, hold .. ' ' .. ARGV[2] .. ' x')
    local value, token = hold, 0
    if ARGV[5] == '1' then
      local field
      token, field = new_token()
      value = value .. field
    end
    redis.call('SET', w, value, 'PX', ARGV[2])
    return attempt_reply(1, token, mine)
  end
end
if wait < 1 then
  wait = 1
end
if ARGV[4] ~= '1' then
  return attempt_reply(4, wait, mine)
end
if not join(q, d, hold .. ' ' .. ARGV[2] .. ' x', now, timeout, ARGV[7] == '1') then
  return attempt_reply(5, 0, mine)
end
return attempt_reply(3, wait, mine)
