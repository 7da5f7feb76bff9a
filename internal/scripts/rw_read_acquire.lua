-- rw_read_acquire: one attempt of a new read hold on a read-write lock.
--
-- KEYS[1] w, KEYS[2] r, KEYS[3] ww, KEYS[4] rw (see _rw.lua)
-- ARGV[1]  hold id
-- ARGV[2]  lease in ms (> 0)
-- ARGV[3]  the caller's own write hold id (a downgrade: the writer takes the read side), or ""
-- ARGV[4]  "1" when the caller will wait: a failed attempt sets the readers-waiting flag, so
--          that the next write release or writer give-up wakes the readers; "0" not to
-- ARGV[5]  "1" for the fair mode: a new reader waits while a live writer waits; "0" not to
-- ARGV[6]  writer timeout in ms (the flag lives twice as long)
--
-- Replies: 1 acquired; < 0 not acquired, -1 - reply ms until it is worth trying again without
-- a message (the writer's remaining lease, or the last waiting writer's liveness deadline).
-- Error WRONGTYPE when w holds a value aqs did not write.
--@include _rw
local w, r, ww, rw = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local hold, lease = ARGV[1], tonumber(ARGV[2])
local v = redis.call('GET', w)
local now, wait
if v then
  if ARGV[3] == '' or not owns(v, ARGV[3]) then
    parse_value(v)
    wait = redis.call('PTTL', w)
  end
elseif ARGV[5] == '1' then
  local d = latest(ww)
  if d then
    now = server_ms()
    if d > now then
      wait = d - now
    end
  end
end
if wait then
  if ARGV[4] == '1' then
    redis.call('SET', rw, '1', 'PX', 2 * tonumber(ARGV[6]))
  end
  if wait < 1 then
    wait = 1
  end
  return -1 - wait
end
now = now or server_ms()
redis.call('ZADD', r, string.format('%d', now + lease), hold)
keep_alive(r, lease)
return 1
