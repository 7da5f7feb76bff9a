-- lsem_release: give back k of the permits a leased permit holds, and serve the queue.
--
-- KEYS[1] s, KEYS[2] q, KEYS[3] d, KEYS[4] p, KEYS[5] pn (see _lsem.lua)
-- ARGV[1]  permit id
-- ARGV[2]  k: all of its permits (or 0, meaning all) ends the permit, fewer keep it with the
--          rest
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[4]  the caller's Client id: grants to its own waiters are returned, not published
-- KEYS[6]  optional, for a partial release: "<s>:x:<call id>", the key of this release's own
--          under which a run that releases keeps its reply, so that a second run of the same
--          call (after a lost reply) answers the same and gives back nothing more (see
--          _once.lua)
-- ARGV[5]  optional: "1" when the caller knows the permit holds one permit (no need to look)
-- ARGV[6]  optional: the semaphore's expiry in ms (absent or "0": none), see keep_leased in
--          _sem.lua
--
-- Replies (DecodeSem): {status, n, hold ids granted to the caller's Client's waiters (not
-- published)...}. status: 0 released, and the permit still holds n permits; 8 k is above the
-- permits it holds (nothing changed); 9 no live permit has this id: its lease ran out, or it
-- was released by another call (nothing changed).
local s, q, d, p, pn, once = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local id, k = ARGV[1], tonumber(ARGV[2])
-- An earlier run of this call that released (a partial release leaves the permit live, so this
-- is looked at first) kept its reply.
--@inline local kept = replay(once)
if kept then
  return kept
end
local sc = redis.call('ZSCORE', p, id)
--@inline local now = server_ms()
if not sc or tonumber(sc) <= now then
  --@inline keep_leased(ARGV[6])
  return {9, 0}
end
local n = 1
if ARGV[5] ~= '1' then
  n = tonumber(redis.call('HGET', pn, id)) or 1
end
if k == 0 then
  k = n
end
if k > n then
  --@inline keep_leased(ARGV[6])
  return {8, 0}
end
local v = redis.call('HMGET', s, 't', 'u', 'q')
if k == n and v[3] and tonumber(v[1]) - tonumber(v[2]) == 0 then
  -- Waiters queued and no permit free: the release of a contended semaphore, which hands the
  -- permit's place to the head when the head is live, asks for as many permits and no other
  -- lease has run out (each goroutine of a pool taking and giving back one permit). It grants
  -- as dispatch and permits_in do, with the blocks inlined to make no definition on this path;
  -- anything else falls to them below. Nothing is written before it is sure to go this way.
  -- The permits leased out (u) do not change.
  local m = redis.call('LINDEX', q, 0)
  local a = m and string.find(m, ' ', 38, true)
  local b = a and string.find(m, ' ', a + 1, true)
  if b and tonumber(string.sub(m, a + 1, b - 1)) == n then
    local deadline = tonumber(redis.call('ZSCORE', d, m))
    local first = redis.call('ZRANGE', p, 0, 0, 'WITHSCORES')
    if deadline and deadline > now and tonumber(first[2]) > now then
      redis.call('ZREM', p, id)
      redis.call('LPOP', q)
      redis.call('ZREM', d, m)
      local hold = string.sub(m, 1, a - 1)
      local lease = math.max(1, math.min(tonumber(string.sub(m, b + 1)), deadline - now))
      redis.call('ZADD', p, string.format('%d', now + lease), hold)
      if n > 1 then
        redis.call('HDEL', pn, id)
        redis.call('HSET', pn, hold, n)
      end
      --@inline keep_permits(p, pn, lease, n > 1)
      --@inline keep_leased(ARGV[6])
      local client = string.sub(hold, 1, 36)
      local reply = {0, 0}
      if client == ARGV[4] then
        reply[3] = hold
      else
        redis.call(ARGV[3], s .. ':c:' .. client, hold)
      end
      --@inline keep_reply(once, reply)
      return reply
    end
  end
end
if k == n then
  redis.call('ZREM', p, id)
  if n > 1 then
    redis.call('HDEL', pn, id)
  end
elseif n - k == 1 then
  redis.call('HDEL', pn, id)
else
  redis.call('HSET', pn, id, n - k)
end
redis.call('HINCRBY', s, 'u', -k)
if not (v[1] and v[3]) then
  -- Nobody waits: done before any definition is made.
  --@inline keep_leased(ARGV[6])
  local reply = {0, n - k}
  --@inline keep_reply(once, reply)
  return reply
end
--@include _lsem
--@include _once
local total = tonumber(v[1])
local mine = select(2, dispatch(s, q, d, now, total, total - in_use(s, p, pn, now),
  permits_in(s, p, pn, now), ARGV[3], ARGV[4]))
keep_leased(ARGV[6])
table.insert(mine, 1, 0)
table.insert(mine, 2, n - k)
return remember(once, mine)
