-- inspect: read everything stored at one name, for aqs inspect, in one atomic snapshot. It
-- only reads: it may run against a live deployment without changing any primitive's state.
--
-- KEYS     the base key "<prefix>:{<name>}" and its companions, all in the name's slot (see
--          companions in snapshot.go for their order)
--
-- Replies: {server time in ms, then one {type, pttl, data} per key}, where type is TYPE's
-- answer ("none" for a missing key), pttl PTTL's, and data the value of a string, HGETALL of a
-- hash, LRANGE 0 -1 of a list, ZRANGE 0 -1 WITHSCORES of a zset, and false for anything else.
local t = redis.call('TIME')
local out = {t[1] * 1000 + math.floor(t[2] / 1000)}
for _, k in ipairs(KEYS) do
  local ty = redis.call('TYPE', k)['ok']
  local data = false
  if ty == 'string' then
    data = redis.call('GET', k)
  elseif ty == 'hash' then
    data = redis.call('HGETALL', k)
  elseif ty == 'list' then
    data = redis.call('LRANGE', k, 0, -1)
  elseif ty == 'zset' then
    data = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES')
  end
  out[#out + 1] = {ty, redis.call('PTTL', k), data}
end
return out
