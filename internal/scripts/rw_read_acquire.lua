-- rw_read_acquire: one attempt of a new read hold on a read-write lock.
--
-- KEYS[1] w, KEYS[2] r, KEYS[3] rw (see _rw.lua)
-- ARGV[1]  hold id
-- ARGV[2]  lease in ms (> 0)
-- ARGV[3]  the caller's own write hold id (a downgrade: the writer takes the read side), or ""
-- ARGV[4]  "1" for the fair mode: a new reader waits while a live writer waits; "0" not to
-- ARGV[5]  when the caller will wait: a margin in ms, "0" when it will not wait. A failed
--          attempt of a waiting reader sets the readers-waiting flag (so that the next write
--          release or writer give-up wakes the readers) for the time it reports plus this
--          margin: the reader tries again before the flag ends, and sets it anew, however long
--          the writer holds.
--
-- Replies: 1 acquired; < 0 not acquired, -1 - reply ms until it is worth trying again without
-- a message (the writer's remaining lease, or the waiting writers' liveness). Error WRONGTYPE
-- when w holds a value aqs did not write.
--@include _rw
local w, r, rw = KEYS[1], KEYS[2], KEYS[3]
local hold = ARGV[1]
local v = redis.call('GET', w)
if v and not (v == WAITING and ARGV[4] == '0') and not (ARGV[3] ~= '' and owns(v, ARGV[3])) then
  if v ~= WAITING then
    parse_value(v)
  end
  local wait = redis.call('PTTL', w)
  if wait < 1 then
    wait = 1
  end
  if ARGV[5] ~= '0' then
    redis.call('SET', rw, '1', 'PX', string.format('%d', wait + tonumber(ARGV[5])))
  end
  return -1 - wait
end
local lease = tonumber(ARGV[2])
redis.call('ZADD', r, string.format('%d', server_ms() + lease), hold)
keep_alive(r, lease)
return 1
