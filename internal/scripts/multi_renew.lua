-- multi_renew: extend, or only check, one hold of several names (package multilock; the
-- watchdog's call).
--
-- KEYS[1]  the hold's own key in the names' slot, which holds nothing (the Client's record of
--          the hold is filed under it)
-- KEYS[2..] the names' lock keys
-- ARGV[1]  hold id
-- ARGV[2]  lease in ms, or 0 to check that the hold is still there without extending it
--
-- Replies: 1 the hold has every name (each extended when ARGV[2] > 0); 0 it lost one (none
-- is extended).
--@include _lock_value
local now = server_ms()
local vals = {}
for i = 2, #KEYS do
  local v = live_value(redis.call('GET', KEYS[i]), now)
  if not v or not owns(v, ARGV[1]) then
    return 0
  end
  vals[i] = v
end
if ARGV[2] ~= '0' then
  for i = 2, #KEYS do
    extend_lease(KEYS[i], vals[i], tonumber(ARGV[2]))
  end
end
return 1
