-- _csem: the counting semaphore's permits, a fragment included by every sem_* script.
--
-- Besides the keys of _sem.lua (s's field a holds the available permits):
--   g  "aqs:{n}:g"  a zset of granted queue members scored by the waiter's liveness deadline at
--                   the grant: the fallback for a lost grant message, dropped after that
--                   deadline
--
-- While s's q flag is set (the queue may hold entries), a is kept GATE below the available
-- permits. It was made for a plain HINCRBY acquisition, which then went negative and could not
-- pass a waiter, undone by the caller's next attempt; that acquisition was dropped (until its
-- undo, a failed one made every other caller see fewer permits than there are: see
-- semaphore/counting.go), and the gate stays because the scripts' fast paths read "nobody
-- queued" and "queued, no permit free" from a and q in one HMGET (a layout change would also
-- strand semaphores already in Redis). Every script reads a with counts and writes it with
-- save.
--@include _sem

-- GATE is 2^50: a minus GATE stays exact in Lua's doubles, and no semaphore has that many
-- permits.
local GATE = 1125899906842624

-- counts reads s: c.total (nil when never set), c.avail the available permits and c.gated
-- (the q flag). v is s's fields t, a and q when the caller read them already.
local function counts(s, v)
  v = v or redis.call('HMGET', s, 't', 'a', 'q')
  local raw = tonumber(v[2]) or 0
  local c = {total = tonumber(v[1]), raw = raw, gated = v[3] and true or false}
  c.avail = raw + (c.gated and GATE or 0)
  return c
end

-- save writes c.avail back to a, gated as c.gated says. It never stores more than the total:
-- a release beyond what was taken is refused, but one that ran while a failed plain decrement
-- was in a could pass unseen, and is dropped here. On a semaphore never set, a is removed once
-- no failed decrement is left in it.
local function save(s, c)
  local avail = c.avail
  if c.total and avail > c.total then
    avail = c.total
  end
  local raw = avail - (c.gated and GATE or 0)
  if raw == c.raw then
    return
  end
  if not c.total and raw == 0 then
    redis.call('HDEL', s, 'a')
  else
    redis.call('HSET', s, 'a', string.format('%d', raw))
  end
end

-- record_grant records the grant of queue member m (whose hold id is hold) in zset g, scored
-- by the waiter's liveness deadline, as the fallback for a lost message. Records whose
-- deadline passed are dropped on every sixteenth grant (by the granted hold's sequence
-- number), so that g stays small without a call on every grant: their permits stay taken, as
-- if their waiter took them and died, since it may well have taken them. g lives a second
-- beyond the latest deadline it records: a record outlives any message it stands in for, and
-- an abandoned g expires.
--@block record_grant(g, m, hold, deadline, now)
if tonumber(string.sub(hold, 38)) % 16 == 0 then
  redis.call('ZREMRANGEBYSCORE', g, '-inf', now)
end
redis.call('ZADD', g, string.format('%d', deadline), m)
--@inline extend_ttl(g, deadline - now + 1000)
--@end

-- grants_in returns the counting semaphore's give (see dispatch), which records each grant in
-- g (record_grant).
local function grants_in(g, now)
  return function(m, hold, _, _, deadline)
    --@inline record_grant(g, m, hold, deadline, now)
  end
end

-- take_grant removes member's grant record from g and reports whether it was live.
local function take_grant(g, member, now)
  local sc = redis.call('ZSCORE', g, member)
  if not sc then
    return false
  end
  redis.call('ZREM', g, member)
  return tonumber(sc) > now
end

-- serve runs dispatch (see _sem.lua) on c, with grants recorded in g, and returns the hold
-- ids granted to Client from's waiters.
local function serve(s, q, d, g, c, now, pub, from)
  local mine, emptied
  c.avail, mine, emptied = dispatch(s, q, d, now, c.total, c.avail, grants_in(g, now), pub, from)
  if emptied then
    c.gated = false
  end
  return mine
end
