-- rw_force_release: free a read-write lock whoever holds it (administration), or only what
-- one hold has (a write hold or a read hold), and serve the queue.
--
-- KEYS[1] w, KEYS[2] r, KEYS[3] rn, KEYS[4] q, KEYS[5] d (see _rw.lua)
-- ARGV[1]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[2]  hold id, or "" for every holder
--
-- Replies: 1 something was held (by that hold) and was released, and the queue was served; 0
-- otherwise. Error WRONGTYPE when w or rn holds a value of another type.
--@include _rw
local w, r, rn, q, d = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local pub, hold = ARGV[1], ARGV[2]
local now = server_ms()
local v = redis.call('GET', w)
local held = false
if hold == '' then
  if v then
    parse_value(v)
  end
  held = v ~= false or live_first(r, now) ~= nil
  redis.call('HLEN', rn) -- a key of another type there is reported (WRONGTYPE), not deleted
  redis.call('DEL', w, r, rn)
elseif v and owns(v, hold) then
  redis.call('DEL', w)
  held = true
else
  local s = redis.call('ZSCORE', r, hold)
  if s then
    drop_reader(r, rn, hold)
    held = tonumber(s) > now
  end
end
if held then
  tell(serve(w, r, q, d, now), w, pub, nil)
  return 1
end
return 0
