-- lsem_available: the permits of a leased-permit semaphore available now, in server time
-- (permits whose lease ran out count as available; they are dropped on the way).
--
-- KEYS[1] s, KEYS[2] p, KEYS[3] pn (see _lsem.lua)
--
-- Replies: {available, total}, or {0, -1} when the permits were never set.
--@include _lsem
local t = tonumber(redis.call('HGET', KEYS[1], 't'))
if not t then
  return {0, -1}
end
return {t - in_use(KEYS[1], KEYS[2], KEYS[3], server_ms()), t}
