-- rw_give_up: a waiter of a read-write lock stops waiting (its context ended, or its wait
-- bound), or an attempt whose outcome is unknown is undone: whatever the hold has is given up.
--
-- KEYS[1] w, KEYS[2] r, KEYS[3] rn, KEYS[4] q, KEYS[5] d (see _rw.lua)
-- ARGV[1]  hold id
-- ARGV[2]  lease in ms it asked for
-- ARGV[3]  "s" for a reader, "x" for a writer (with ARGV[1] and ARGV[2], its queue member)
-- ARGV[4]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
--
-- The waiter leaves the queue; what the hold has (the write side, or a read hold: granted in
-- the same instant, or taken by an attempt whose reply was lost) is given up; and the queue is
-- served, since the waiter may have held back those behind it.
--
-- Replies (DecodeGiveUp): 1 it was queued (and live) and left; 2 it held, and gave it up; 0
-- neither.
--@include _rw
local w, r, rn, q, d = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local hold, mode = ARGV[1], ARGV[3]
local now = server_ms()
local left = leave(q, d, hold .. ' ' .. ARGV[2] .. ' ' .. mode, now)
local had = false
if mode == 'x' then
  local v = redis.call('GET', w)
  if v and parse_value(v) == hold then
    redis.call('DEL', w)
    had = true
  end
else
  local s = redis.call('ZSCORE', r, hold)
  if s then
    drop_reader(r, rn, hold)
    had = tonumber(s) > now
  end
end
tell(serve(w, r, q, d, now), w, ARGV[4], nil)
if had then
  return 2
end
if left then
  return 1
end
return 0
