-- multi_token: the fencing token of a hold of several names (package multilock), assigned on
-- first request (see lock_token.lua for why tokens only grow), one for all its names.
--
-- KEYS[1]  the hold's own key (see multi_renew.lua), KEYS[2..] the names' lock keys
-- ARGV[1]  hold id
--
-- Replies: the token (>= 1); 0 when the hold lost a name.
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
local t = string.match(vals[2], ' t(%d+)')
if t then
  return tonumber(t)
end
local token, field = new_token()
for i = 2, #KEYS do
  redis.call('SET', KEYS[i], with_field(vals[i], field), 'KEEPTTL')
end
return token
