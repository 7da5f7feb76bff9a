-- lsem_release_id: give back k of the permits of the leased permit of a given id, whoever holds
-- it and from any process (Leased.ReleaseID and ReleasePartID, Redisson's release(id)), and
-- serve the queue.
--
-- KEYS[1] s, KEYS[2] q, KEYS[3] d, KEYS[4] p, KEYS[5] pn, KEYS[6] pr (see _lsem.lua)
-- KEYS[7]  "<s>:x:<call id>", the key of this call's own under which a run that releases
--          keeps its reply for 10s, so that a second run of the same call (after a lost
--          reply) answers the same and gives back nothing more (see _once.lua)
-- ARGV[1]  permit id
-- ARGV[2]  k: all of its permits (or 0, meaning all) ends the permit, fewer keep it with the
--          rest
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[4]  the caller's Client id: grants to its own waiters are returned, not published
-- ARGV[5]  optional: the semaphore's expiry in ms (absent or "0": none), see keep_leased in
--          _sem.lua
--
-- A release that ends the permit leaves its mark in pr, scored by the lease end the permit
-- had: until then the holder's renewal (lsem_renew.lua) and its own release (which looks at
-- pr when it finds the permit gone) tell a permit released by id from one whose lease ran
-- out. The permit's lease and the queue's order are those of any release.
--
-- Replies (DecodeSem): {status, n, hold ids granted to the caller's Client's waiters (not
-- published)...}. status: 0 released, and the permit still holds n permits; 8 k is above the
-- permits it holds (nothing changed); 9 no live permit has this id (nothing changed); 11 no
-- live permit has this id because a release by its id ended it (nothing changed).
--@include _lsem
--@include _once
local s, q, d, p, pn, pr, once = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local id, k = ARGV[1], tonumber(ARGV[2])
--@inline local kept = replay(once)
if kept then
  return kept
end
local now = server_ms()
local sc = redis.call('ZSCORE', p, id)
if not sc or tonumber(sc) <= now then
  local mark = redis.call('ZSCORE', pr, id)
  keep_leased(ARGV[5])
  if mark and tonumber(mark) > now then
    return {11, 0}
  end
  return {9, 0}
end
local n = tonumber(redis.call('HGET', pn, id)) or 1
if k == 0 then
  k = n
end
if k > n then
  keep_leased(ARGV[5])
  return {8, 0}
end
if k == n then
  redis.call('ZREM', p, id)
  redis.call('HDEL', pn, id)
  -- The mark: marks whose permit's lease would have ended go first, so pr stays small.
  redis.call('ZREMRANGEBYSCORE', pr, '-inf', now)
  redis.call('ZADD', pr, sc, id)
  --@inline extend_ttl(pr, tonumber(sc) - now + 1000)
elseif n - k == 1 then
  redis.call('HDEL', pn, id)
else
  redis.call('HSET', pn, id, n - k)
end
redis.call('HINCRBY', s, 'u', -k)
local mine = {}
local v = redis.call('HMGET', s, 't', 'q')
if v[1] and v[2] then
  local total = tonumber(v[1])
  mine = select(2, dispatch(s, q, d, now, total, total - in_use(s, p, pn, now),
    permits_in(s, p, pn, now), ARGV[3], ARGV[4]))
end
keep_leased(ARGV[5])
table.insert(mine, 1, 0)
table.insert(mine, 2, n - k)
return remember(once, mine)
