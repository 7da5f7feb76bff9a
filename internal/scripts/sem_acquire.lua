-- sem_acquire: one attempt to take n permits of a counting semaphore.
--
-- KEYS[1] s, KEYS[2] q, KEYS[3] d, KEYS[4] g (see _sem.lua and _csem.lua)
-- KEYS[5]  optional: "<s>:a:<call id>", a key of this call's own (see sem_release.lua), set
--          for 10s to the status the run answered: a run that finds it is the same call again,
--          and answers that status without doing anything ("x" or "r": the caller gave up on
--          it, see sem_unsure.lua: 0)
-- KEYS[6]  optional: "<s>:b:<hold id>", the mark of a heartbeat that collected the hold's
--          grant (see sem_heartbeat.lua)
-- ARGV[1]  hold id (never used again once it gave up)
-- ARGV[2]  n, the permits asked for (> 0)
-- ARGV[3]  waiter timeout in ms
-- ARGV[4]  "1" to join the queue (or stay in it) when the permits cannot be had now, "0" not to
-- ARGV[5]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[6]  "1" when the hold attempted before (it may have been granted permits), "0" for its
--          first attempt, which takes the uncontended path while nobody is queued
-- ARGV[7]  optional: the semaphore's expiry in ms (absent or "0": none), see keep_counting in
--          _sem.lua
--
-- Waiters are served in arrival order: while a live waiter is queued, nobody takes permits
-- past it, and a release grants them to the waiters in order (see dispatch in _sem.lua).
--
-- Replies (DecodeAttempt): {status, 0, hold ids granted to waiters of the caller's Client,
-- which were not published: the caller tells them...}, with the statuses of every attempt
-- script: 1 acquired; 2 acquired by a grant made while the hold waited (its message missed);
-- 3 queued; 4 not acquired and not queued; 5 no longer queued (its deadline passed, or it
-- was granted permits and they were taken back): start over under a new hold id; 6 the
-- permits were never set; 7 n is above the total permits (and the hold left the queue).
local s, q, d, g = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local once = KEYS[5]
if once then
  local prev = redis.call('SET', once, '1', 'NX', 'GET', 'PX', 10000)
  if prev then
    return {tonumber(prev) or 4, 0} -- "x", "r": the caller gave up on it (sem_unsure.lua)
  end
end
local hold, n = ARGV[1], tonumber(ARGV[2])
local v = redis.call('HMGET', s, 't', 'a', 'q')
if v[3] == false and ARGV[6] == '0' and v[2] and n <= tonumber(v[2]) then
  -- Nobody queued and the permits are there: the uncontended acquisition, before any
  -- definition is made (each one costs the server a closure on every run).
  redis.call('HINCRBY', s, 'a', -n)
  --@inline keep_counting(ARGV[7])
  return {1, 0}
end
if v[1] and v[3] and ARGV[6] == '0' and ARGV[4] == '1' and n <= tonumber(v[1])
    and tonumber(v[2]) + 1125899906842624 == 0 then
  -- Waiters queued and no permit free: the arrival at a contended semaphore, which joins the
  -- tail as join does (a first attempt cannot be queued already), with the block inlined to
  -- make no definition on this path; anything else falls to the general path below.
  --@inline local now = server_ms()
  local timeout = tonumber(ARGV[3])
  --@inline join_fresh(q, d, hold .. ' ' .. n, string.format('%d', now + timeout), timeout)
  if once then
    redis.call('SET', once, '3', 'PX', 10000) -- see the end
  end
  --@inline keep_counting(ARGV[7])
  return {3, 0}
end
--@include _csem
local c = counts(s, v)
if not c.total then
  save(s, c)
  if once then
    redis.call('SET', once, '6', 'PX', 10000)
  end
  return {6, 0}
end
local status, mine = 4, {}
local member = hold .. ' ' .. n
if not c.gated and ARGV[6] == '0' then
  -- Nobody queued and no grant to look for: the uncontended path.
  if n > c.total then
    status = 7
  elseif c.avail >= n then
    c.avail = c.avail - n
    status = 1
  elseif ARGV[4] == '1' then
    join_sem(s, q, d, member, server_ms(), tonumber(ARGV[3]), true, false)
    c.gated = true
    status = 3
  end
else
  local now = server_ms()
  if c.gated then
    mine = serve(s, q, d, g, c, now, ARGV[5], string.sub(hold, 1, 36))
  end
  if ARGV[6] == '1' and (take_grant(g, member, now)
      or (KEYS[6] and redis.call('EXISTS', KEYS[6]) == 1)) then
    -- Granted: its record is here, or a heartbeat collected it already (KEYS[6], see
    -- sem_heartbeat.lua) and its reply never reached the waiter: taking permits again
    -- would lose the granted ones.
    status = 2
  elseif n > c.total then
    leave(q, d, member, now)
    status = 7
  elseif c.avail >= n and not c.gated then
    c.avail = c.avail - n
    status = 1
  elseif ARGV[4] == '1' then
    if join_sem(s, q, d, member, now, tonumber(ARGV[3]), ARGV[6] == '0', c.gated) then
      c.gated = true
      status = 3
    else
      status = 5 -- no longer queued: start over under a new hold id
    end
  end
end
save(s, c)
if once and status ~= 1 then
  -- Every outcome is recorded, so that a run again answers it and does nothing. Queued (-1)
  -- above all: a first attempt joins without looking for the hold in the queue (it cannot be
  -- there, but for a run of itself), so a run again that came after a release had granted the
  -- hold would queue it a second time, and the next grant would take permits for a call that
  -- is over: permits lost for good (the chaos package's network test found it, under
  -- connection cuts).
  redis.call('SET', once, string.format('%d', status), 'PX', 10000)
end
--@inline keep_counting(ARGV[7])
table.insert(mine, 1, status)
table.insert(mine, 2, 0)
return mine
