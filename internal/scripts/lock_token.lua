-- lock_token: the fencing token of a hold, assigned on first request.
--
-- KEYS[1]  lock key (see lock_acquire.lua)
-- ARGV[1]  hold id
--
-- The token is the server time in microseconds when it is first asked for, during the hold.
-- Holds of one lock never overlap, and between two holds come at least a release and an
-- acquisition, each a script or command of its own, so a token assigned during a later hold
-- is strictly greater. It assumes that the server's clock does not step backwards, as Redis's
-- own key expiry does. A holder that asks after it lost the lock gets no token.
--
-- Replies: the token (>= 1); 0 when the key no longer holds this hold. Error WRONGTYPE when
-- the key holds a value aqs did not write.
--@include _lock_value
local k = KEYS[1]
local v = live_value(redis.call('GET', k))
if not v then
  return 0
end
local hold, rest = parse_value(v)
if hold ~= ARGV[1] then
  return 0
end
local t = string.match(rest, ' t(%d+)')
if t then
  return tonumber(t)
end
local token, field = new_token()
redis.call('SET', k, with_field(v, field), 'KEEPTTL')
return token
