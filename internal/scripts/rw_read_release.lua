-- rw_read_release: count one read hold down, or end it; the last reader wakes a writer.
--
-- KEYS[1] w, KEYS[2] r, KEYS[3] rn (see _rw.lua)
-- ARGV[1]  hold id
-- ARGV[2]  "1" to end the hold whatever its count, "0" to count one down
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[4]  "1" if the hold was ever re-entered (its count in rn must go too), "0" if not
-- ARGV[5]  "1" if the caller knows that the hold's lease is still running (its local deadline,
--          a lower bound of the lease in server time, has not passed): the end of the hold then
--          skips the server-time check, "0" if not
--
-- Replies: n >= 1 holds left; 0 released; -2 released while writers wait and none holds (if it
-- was the last live reader, "1" was published to the writers); -1 the hold is not a live
-- reader, nothing changed.
--@include _rw
local w, r, rn = KEYS[1], KEYS[2], KEYS[3]
local hold = ARGV[1]
if ARGV[2] == '1' and ARGV[5] == '1' then
  -- The common release: two commands unless a writer waits.
  if redis.call('ZREM', r, hold) == 0 then
    return -1
  end
  if ARGV[4] == '1' then
    redis.call('HDEL', rn, hold)
  end
  if redis.call('GET', w) == WAITING then
    wake_writer(w, r, server_ms(), ARGV[3])
    return -2
  end
  return 0
end
local s = redis.call('ZSCORE', r, hold)
local now = server_ms()
if not s or tonumber(s) <= now then
  return -1
end
if ARGV[2] == '0' then
  local extra = tonumber(redis.call('HGET', rn, hold))
  if not extra then
    return 1 -- count one down from 1: the caller still holds once more than Redis knew
  end
  if extra > 1 then
    redis.call('HINCRBY', rn, hold, -1)
  else
    redis.call('HDEL', rn, hold)
  end
  return extra
end
redis.call('ZREM', r, hold)
if ARGV[4] == '1' then
  redis.call('HDEL', rn, hold)
end
if redis.call('GET', w) == WAITING then
  wake_writer(w, r, now, ARGV[3])
  return -2
end
return 0
