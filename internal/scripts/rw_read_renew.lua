-- rw_read_renew: extend, or only check, one read hold (the watchdog's call).
--
-- KEYS[1] r, KEYS[2] rn (see _rw.lua)
-- ARGV[1]  hold id
-- ARGV[2]  lease in ms, or 0 to check that the hold is still live without extending it
--
-- Each reader's lease is its own score: renewing one reader never extends another.
--
-- Replies: 1 the hold is live (and extended when ARGV[2] > 0); 0 it is gone.
--@include _rw
local r, hold, lease = KEYS[1], ARGV[1], tonumber(ARGV[2])
local s = redis.call('ZSCORE', r, hold)
local now = server_ms()
if not s or tonumber(s) <= now then
  return 0
end
if lease > 0 then
  redis.call('ZADD', r, 'XX', string.format('%d', now + lease), hold)
  keep_alive(r, lease)
  keep_alive(KEYS[2], lease) -- its re-entry count, if any, lives as long as the hold
end
return 1
