-- rw_read_reenter: re-enter a read hold that the caller believes it has.
--
-- KEYS[1] r, KEYS[2] rn (see _rw.lua)
-- ARGV[1]  hold id
-- ARGV[2]  lease in ms: 0 leaves the lease alone, > 0 extends it to at least this
--
-- Replies: 1 re-entered; 0 the hold is not a live reader (it was lost; nothing changed).
--@include _rw
local r, rn = KEYS[1], KEYS[2]
local hold, lease = ARGV[1], tonumber(ARGV[2])
local s = redis.call('ZSCORE', r, hold)
local now = server_ms()
if not s or tonumber(s) <= now then
  return 0
end
redis.call('HINCRBY', rn, hold, 1)
if lease > 0 and tonumber(s) < now + lease then
  redis.call('ZADD', r, 'XX', string.format('%d', now + lease), hold)
  keep_alive(r, lease)
end
keep_alive(rn, math.max(tonumber(s) - now, lease))
return 1
