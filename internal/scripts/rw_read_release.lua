-- rw_read_release: count one read hold down, or end it and serve the queue.
--
-- KEYS[1] w, KEYS[2] r, KEYS[3] rn, KEYS[4] q, KEYS[5] d (see _rw.lua)
-- ARGV[1]  hold id
-- ARGV[2]  "1" to end the hold whatever its count, "0" to count one down
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[4]  "1" if the hold was ever re-entered (its count in rn must go too), "0" if not
-- ARGV[5]  "1" if the caller knows that the hold's lease is still running (its local deadline,
--          a lower bound of the lease in server time, has not passed): the end of the hold then
--          skips the server-time check, "0" if not
--
-- Ending the last live read hold grants the writer at the head of the queue the write side.
--
-- Replies (DecodeRelease): {0, n} counted down, n >= 1 holds left; {1, hold ids granted to
-- waiters of the caller's Client (not published)...} released; {4} the hold is not a live
-- reader, nothing changed.
local w, r, rn, q = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local hold = ARGV[1]
local ended = false
if ARGV[2] == '1' and ARGV[5] == '1' then
  -- The common release: two or three commands unless someone waits.
  if redis.call('ZREM', r, hold) == 0 then
    return {4}
  end
  if ARGV[4] == '1' then
    redis.call('HDEL', rn, hold)
  end
  if not redis.call('LINDEX', q, 0) then
    return {1}
  end
  ended = true
end
--@include _rw
local d = KEYS[5]
local now = server_ms()
if not ended then
  local s = redis.call('ZSCORE', r, hold)
  if not s or tonumber(s) <= now then
    return {4}
  end
  if ARGV[2] == '0' then
    local extra = tonumber(redis.call('HGET', rn, hold))
    if not extra then
      return {0, 1} -- count one down from 1: the caller still holds once more than Redis knew
    end
    if extra > 1 then
      redis.call('HINCRBY', rn, hold, -1)
    else
      redis.call('HDEL', rn, hold)
    end
    return {0, extra}
  end
  drop_reader(r, rn, hold)
end
local mine = tell(serve(w, r, q, d, now), w, ARGV[3], string.sub(hold, 1, 36))
table.insert(mine, 1, 1)
return mine
