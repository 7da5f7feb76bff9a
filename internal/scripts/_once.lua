-- _once: a release's reply kept under a key of the call's own, a fragment included by the
-- release scripts whose second run would not find out that the first one ran (the leased
-- semaphore's partial release, which leaves the permit live).
--
-- A release whose reply was lost may run twice: go-redis's retry, or the caller's own send
-- again (internal/core/release.go). So the caller names a key of the call's own,
-- "<base key>:x:<id>" (KEYS after the primitive's), the first run keeps its reply there for
-- once_ms, within which any second run comes, and a run that finds it answers from it what
-- the first run did and changes nothing. The hot paths of the scripts write the key inline,
-- before any definition is made.

-- once_ms is how long a release's reply is kept (ms).
local once_ms = 10000

-- remember keeps reply (a flat list of integers and strings without spaces) under once, when the
-- caller named one, and returns it.
local function remember(once, reply)
  if once then
    redis.call('SET', once, table.concat(reply, ' '), 'PX', once_ms)
  end
  return reply
end

-- replay returns the reply an earlier run of this call kept under once, or nil.
local function replay(once)
  local v = once and redis.call('GET', once)
  if not v then
    return nil
  end
  local reply = {}
  for f in string.gmatch(v, '%S+') do
    reply[#reply + 1] = tonumber(f) or f
  end
  return reply
end
