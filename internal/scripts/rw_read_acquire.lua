-- rw_read_acquire: one attempt of a new read hold on a read-write lock, joining the wait queue
-- on failure.
--
-- KEYS[1] w, KEYS[2] r, KEYS[3] rn, KEYS[4] q, KEYS[5] d (see _rw.lua)
-- ARGV[1]  hold id
-- ARGV[2]  lease in ms (> 0)
-- ARGV[3]  the caller's own write hold id (a downgrade: the writer takes the read side, at
--          once, whatever waits), or ""
-- ARGV[4]  "1" for the fair mode: a new reader never passes a live waiter; "0" for the
--          non-fair mode: a new reader enters whenever no writer holds
-- ARGV[5]  waiter timeout in ms
-- ARGV[6]  "1" to join the queue (or keep this waiter's place) on failure, "0" not to
-- ARGV[7]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[8]  "1" for the hold's first attempt (it cannot be queued already), "0" for a later one
--
-- Replies: as rw_write_acquire.lua's ({1, 0} acquired, {2, 0} granted while it waited, {3, ms}
-- queued, {4, ms} not acquired, {5, 0} no longer queued, start over; each followed by the hold
-- ids granted to waiters of the caller's Client). A first attempt with nobody queued (or any
-- attempt in the non-fair mode) while no writer holds takes the short path: a hold that reads
-- already (granted while it waited) has its lease set anew and is answered as acquired. Error
-- WRONGTYPE when w holds a value aqs did not write.
local w, r, q = KEYS[1], KEYS[2], KEYS[4]
local v = redis.call('GET', w)
if not v and ARGV[3] == '' and ARGV[8] == '1' and (ARGV[4] == '0' or not redis.call('LINDEX', q, 0)) then
  -- No writer, and nobody queued (or the non-fair mode): the uncontended path, with the blocks
  -- inlined before any definition is made (each costs the server a closure on every run).
  --@inline local now = server_ms()
  --@inline add_reader(r, ARGV[1], tonumber(ARGV[2]), now)
  return {1, 0}
end
--@include _rw
local rn, d = KEYS[3], KEYS[5]
local hold, lease = ARGV[1], tonumber(ARGV[2])
local member = hold .. ' ' .. ARGV[2] .. ' s'
local from = string.sub(hold, 1, 36)
local now = server_ms()
if v then
  parse_value(v) -- WRONGTYPE for a value aqs did not write
  if ARGV[3] ~= '' and owns(v, ARGV[3]) then
    add_reader(r, hold, lease, now) -- a downgrade
    return {1, 0}
  end
end
if holds_it(w, r, hold, 's', now) then
  return {2, 0}
end
local mine = {}
if not v then
  local granted = serve(w, r, q, d, now)
  local ours = take_out(granted, hold)
  mine = tell(granted, w, ARGV[7], from)
  if ours then
    return attempt_reply(2, 0, mine)
  end
  v = redis.call('GET', w)
end
local wait
if v then
  wait = redis.call('PTTL', w)
else
  local head
  if ARGV[4] == '1' then
    head = live_head(q, d, now)
  end
  if not head or head == member then
    if ARGV[8] ~= '1' then
      leave(q, d, member, now) -- it may be queued (the non-fair mode takes it anywhere)
    end
    add_reader(r, hold, lease, now)
    return attempt_reply(1, 0, mine)
  end
  -- A writer waits at the head for the readers to leave (the queue was served): behind it.
  wait = (live_first(r, now) or now + 1) - now
end
if wait < 1 then
  wait = 1
end
if ARGV[6] ~= '1' then
  return attempt_reply(4, wait, mine)
end
if not join(q, d, member, now, tonumber(ARGV[5]), ARGV[8] == '1') then
  return attempt_reply(5, 0, mine)
end
return attempt_reply(3, wait, mine)
