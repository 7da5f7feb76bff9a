-- _time: the server clock, a fragment included by the other fragments.
--
-- No script receives a client's clock: every deadline is computed from TIME.

-- server_ms is the server time in milliseconds.
local function server_ms()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end
