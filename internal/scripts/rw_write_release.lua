-- rw_write_release: count one write hold down, or end it and wake who may go next.
--
-- KEYS[1] w, KEYS[2] r, KEYS[3] rn, KEYS[4] ww, KEYS[5] rw (see _rw.lua; the keys of
--          rw_force_release.lua)
-- ARGV[1]  hold id
-- ARGV[2]  "1" to end the hold whatever its count, "0" to count one down
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
--
-- Ending the hold wakes every waiting reader with one "*" (a writer that took the read side
-- before releasing stays a reader: a downgrade), and one writer per Client with "1" when a
-- writer waits and no reader holds.
--
-- Replies: n >= 1 holds left; 0 released; -1 w does not hold this hold, nothing changed.
--@include _rw
local w, r, ww, rw = KEYS[1], KEYS[2], KEYS[4], KEYS[5]
local hold = ARGV[1]
local v = redis.call('GET', w)
local rest = rest_of(v, hold)
if not rest then
  return -1
end
if ARGV[2] == '0' then
  local n = hold_count(rest)
  if n > 1 then
    redis.call('SET', w, with_count(hold, rest, n - 1), 'KEEPTTL')
    return n - 1
  end
  return 1 -- count one down from 1: the caller still holds once more than Redis knew
end
local now = server_ms()
wake_readers(w, rw, ARGV[3])
if mark_waiting(w, ww, now) then
  wake_writer(w, r, now, ARGV[3])
end
return 0
