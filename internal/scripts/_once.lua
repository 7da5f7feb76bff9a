-- _once: a release's reply kept under a key of the call's own, a fragment included by the
-- release scripts whose second run would not find out that the first one ran (the leased
-- semaphore's partial release, which leaves the permit live).
--
-- A release whose reply was lost may run twice: go-redis's retry, or the caller's own send
-- again (internal/core/release.go). So the caller names a key of the call's own,
-- "<base key>:x:<id>" (KEYS after the primitive's), the first run keeps its reply there for
-- 10s, within which any second run comes, and a run that finds it answers from it what
-- the first run did and changes nothing. The hot paths of the scripts inline the blocks,
-- before any definition is made.

-- keep_reply keeps reply (a flat list of integers and strings without spaces) under once, when
-- the caller named one, for 10s.
--@block keep_reply(once, reply)
if once then
  redis.call('SET', once, table.concat(reply, ' '), 'PX', 10000)
end
--@end

-- remember keeps reply under once (keep_reply) and returns it.
local function remember(once, reply)
  --@inline keep_reply(once, reply)
  return reply
end

-- replay returns the reply an earlier run of this call kept under once, or nil.
--@block replay(once) -> reply
local v = once and redis.call('GET', once)
if v then
  reply = {}
  for f in string.gmatch(v, '%S+') do
    reply[#reply + 1] = tonumber(f) or f
  end
end
--@end
