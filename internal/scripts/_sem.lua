-- _sem: the semaphores' wait queue, a fragment included by every sem_* and lsem_* script.
--
-- A semaphore named n has, all in n's slot:
--   s  "aqs:{n}"     a hash: t the total permits (absent: never set), a the available permits
--                    (counting semaphore) or u the permits leased out (leased semaphore), and
--                    q "1" while the wait queue may hold entries (so the uncontended path reads
--                    one hash and never looks at the queue). s has no TTL: like Redisson's, a
--                    semaphore's permits are configuration, kept until deleted; unless the
--                    semaphore has an expiry (see keep_counting)
--   q  "aqs:{n}:q"   the wait queue, a list of members "<hold id> <n>" (counting) or
--                    "<hold id> <n> <lease ms>" (leased) in arrival order
--   d  "aqs:{n}:d"   a zset of the same members scored by their liveness deadline (server ms),
--                    kept by the waiters' attempts and their Client's heartbeats (see
--                    _fair_queue.lua: dead waiters and ghosts are dropped at the head)
-- and one channel per Client, s .. ':c:' .. client id: a grant is the granted hold id, sent
-- to the waiter's Client only; "*" wakes that Client's waiters to look again.
--@include _queue

-- parse_member returns a queue member's hold id, permits and lease (nil for the counting
-- semaphore).
local function parse_member(m)
  local a = string.find(m, ' ', 38, true)
  local b = string.find(m, ' ', a + 1, true)
  if b then
    return string.sub(m, 1, a - 1), tonumber(string.sub(m, a + 1, b - 1)), tonumber(string.sub(m, b + 1))
  end
  return string.sub(m, 1, a - 1), tonumber(string.sub(m, a + 1)), nil
end

-- dispatch serves the queue in order while the live head can be served: a head asking for
-- more than the total is dropped (its Client is woken, and its next attempt reports the
-- error); a head whose permits are available is granted them by give(member, hold, n, lease,
-- deadline) and notified; a head that must wait stops the loop, so later small requests never
-- pass a large one. A grant to a waiter of Client from (the caller's, or nil) is not
-- published: its hold id is returned in mine for the caller to tell. It clears s's q flag when
-- the queue is empty, and returns the permits left available, mine, and whether it cleared
-- the flag.
local function dispatch(s, q, d, now, total, avail, give, pub, from)
  local mine = {}
  -- With no permit available no head can be served, and the head is not even looked at (the
  -- common case after a release hands its permits over): one that asks for more than the
  -- total is rejected by the next dispatch that has permits (see model.Sem).
  while avail > 0 do
    local m, deadline = live_head(q, d, now)
    if not m then
      redis.call('HDEL', s, 'q')
      return avail, mine, true
    end
    local hold, n, lease = parse_member(m)
    if n > avail and n <= total then
      return avail, mine, false
    end
    redis.call('LPOP', q)
    redis.call('ZREM', d, m)
    local client = string.sub(hold, 1, 36)
    if n > total then
      redis.call(pub, s .. ':c:' .. client, '*')
    else
      avail = avail - n
      give(m, hold, n, lease, deadline)
      if client == from then
        mine[#mine + 1] = hold
      else
        redis.call(pub, s .. ':c:' .. client, hold)
      end
    end
  end
  return avail, mine, false
end

-- join_sem is join (see _queue.lua) for a semaphore: it also sets s's q flag, unless gated
-- says it is set already, when a member joins. A later attempt whose entry is dead or gone
-- gets false and is left out: the waiter starts over under a new hold id.
local function join_sem(s, q, d, member, now, timeout, fresh, gated)
  if not join(q, d, member, now, timeout, fresh) then
    return false
  end
  if fresh and not gated then
    redis.call('HSET', s, 'q', '1')
  end
  return true
end

-- beat renews a queued waiter's liveness deadline to timeout ms from now (a heartbeat of its
-- Client) and keeps the queue alive (see keep_queue); it returns 1, or 0 when member is dead or
-- gone. Unlike join, it leaves a dead entry in d until it reaches the head, so that it never
-- revives.
local function beat(q, d, member, now, timeout)
  local sc = redis.call('ZSCORE', d, member)
  if not sc or tonumber(sc) <= now then
    return 0
  end
  redis.call('ZADD', d, string.format('%d', now + timeout), member)
  keep_queue(q, d, timeout)
  return 1
end

-- keep_until makes key k live at least until ms from now.
local function keep_until(k, ms)
  if redis.call('PTTL', k) < ms then
    redis.call('PEXPIRE', k, ms)
  end
end


-- keep_counting keeps a counting semaphore with an expiry (KEYS[1..4]: s, q, d, g): e is the
-- expiry in ms, an argument of the script (nil or "0": none, and nothing is done). s is made
-- to live e ms from now, or as long as the longest-lived of the other keys if longer, so that
-- s, which counts what they hold, outlives them, and a semaphore with queued waiters or grants
-- not yet collected does not expire: the queue's keys live past the deadlines of its waiters
-- (see keep_queue), g past the deadlines of its grants. The other keys keep their TTLs, all
-- shorter than s's but the calls' keys of their own (10s). Every script that changes a
-- semaphore with an expiry runs it (or keep_leased) last; those that are given s alone
-- (sem_try.lua, sem_drain.lua) extend s by keep_hash instead. So an idle semaphore's keys all
-- go e ms after its last call, or once its last waiter or grant ended if later.
--@block keep_counting(e)
if e and e ~= '0' then
  redis.call('PEXPIRE', KEYS[1], math.max(tonumber(e), redis.call('PTTL', KEYS[2]), redis.call('PTTL', KEYS[3]),
    redis.call('PTTL', KEYS[4])))
end
--@end

-- keep_leased is keep_counting for a leased semaphore (KEYS[1..5]: s, q, d, p, pn): p and pn
-- are made to live exactly a second past the latest lease end in p (their TTLs only grow
-- otherwise: see keep_permits), so that a lease given back keeps nothing, and s at least as
-- long, so that live leases keep the semaphore (as do their renewals: see lsem_renew.lua). pr
-- keeps its TTL, which may outlive s: its marks outlive their semaphore harmlessly.
--@block keep_leased(e)
if e and e ~= '0' then
  local ms = math.max(tonumber(e), redis.call('PTTL', KEYS[2]), redis.call('PTTL', KEYS[3]))
  local last = redis.call('ZRANGE', KEYS[4], -1, -1, 'WITHSCORES')
  if last[2] then
    --@inline local now = server_ms()
    local life = math.max(1, tonumber(last[2]) - now + 1000)
    redis.call('PEXPIRE', KEYS[4], life)
    redis.call('PEXPIRE', KEYS[5], life)
    ms = math.max(ms, life)
  end
  redis.call('PEXPIRE', KEYS[1], ms)
end
--@end

-- keep_hash is keep_counting for the scripts that are given s alone: it makes s live at least
-- e ms more, never shortening its TTL, which another script made as long as the other keys
-- need.
--@block keep_hash(e)
if e and e ~= '0' then
  --@inline extend_ttl(KEYS[1], tonumber(e))
end
--@end
