-- rw_force_release: free a read-write lock whoever holds it (administration), or undo one
-- acquisition whose reply was lost (a write hold or a read hold).
--
-- KEYS[1] w, KEYS[2] r, KEYS[3] rn, KEYS[4] ww, KEYS[5] rw (see _rw.lua)
-- ARGV[1]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[2]  hold id, or "" for every holder
--
-- Replies: 1 something was held (by that hold) and was released, and who may go next was
-- woken; 0 otherwise.
--@include _rw
local w, r, rn, ww, rw = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local pub, hold = ARGV[1], ARGV[2]
local now = server_ms()
local v = redis.call('GET', w)
if v == WAITING then
  v = false
end
if hold == '' then
  local held = v ~= false or live_first(r, now) ~= nil
  if v then
    parse_value(v)
  end
  redis.call('HLEN', rn) -- a key of another type there is reported (WRONGTYPE), not deleted
  redis.call('DEL', w, r, rn, rw)
  mark_waiting(w, ww, now)
  redis.call(pub, w .. ':rch', '*')
  redis.call(pub, w .. ':wch', '1')
  if held then
    return 1
  end
  return 0
end
if v and owns(v, hold) then
  wake_readers(w, rw, pub)
  if mark_waiting(w, ww, now) then
    wake_writer(w, r, now, pub)
  end
  return 1
end
if redis.call('ZREM', r, hold) == 1 then
  redis.call('HDEL', rn, hold)
  wake_writer(w, r, now, pub)
  return 1
end
return 0
