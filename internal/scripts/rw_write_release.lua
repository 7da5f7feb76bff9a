-- rw_write_release: count one write hold down, or end it and serve the queue.
--
-- KEYS[1] w, KEYS[2] r, KEYS[3] rn, KEYS[4] q, KEYS[5] d (see _rw.lua)
-- ARGV[1]  hold id
-- ARGV[2]  "1" to end the hold whatever its count, "0" to count one down
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
--
-- Ending the hold grants the queue's head what it waits for: every reader at the head up to
-- the next writer, or that writer (see serve in _rw.lua). A writer that took the read side
-- before releasing stays a reader (a downgrade).
--
-- Replies (DecodeRelease): {0, n} counted down, n >= 1 holds left; {1, hold ids granted to
-- waiters of the caller's Client (not published)...} released; {4} w does not hold this
-- hold, nothing changed.
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] and ARGV[2] == '1' and redis.call('EXISTS', KEYS[4]) == 0 then
  -- The uncontended release, before any definition is made: a bare hold (no count, no
  -- token) and nobody queued, so there is nobody to serve.
  redis.call('DEL', KEYS[1])
  return {1}
end
--@include _rw
local w, r, rn, q, d = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local hold = ARGV[1]
local rest = rest_of(v, hold)
if not rest then
  return {4}
end
if ARGV[2] == '0' then
  local n = hold_count(rest)
  if n > 1 then
    redis.call('SET', w, with_count(hold, rest, n - 1), 'KEEPTTL')
    return {0, n - 1}
  end
  return {0, 1} -- count one down from 1: the caller still holds once more than Redis knew
end
redis.call('DEL', w)
local mine = tell(serve(w, r, q, d, server_ms()), w, ARGV[3], string.sub(hold, 1, 36))
table.insert(mine, 1, 1)
return mine
