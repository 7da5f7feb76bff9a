-- multi_acquire: one attempt of a new hold on several names at once (package multilock),
-- joining every name's queue on failure, in one arrival order (see _multi.lua).
--
-- KEYS     the names' triples: KEYS[3i-2] lock key l, KEYS[3i-1] queue list q, KEYS[3i]
--          deadline zset d of name i (see _lock.lua), the names in one fixed order
-- ARGV[1]  hold id
-- ARGV[2]  lease in ms (> 0) the hold has once it holds every name
-- ARGV[3]  waiter timeout in ms: a waiter not heard of for this long is dropped
-- ARGV[4]  "1" to join the queues (or renew this waiter's places) on failure, "0" not to
-- ARGV[5]  "1" for the hold's first attempt (it cannot be queued already), "0" for a later one
-- ARGV[6]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[7]  "1" to assign the fencing token when it acquires, "0" not to (see multi_token.lua)
--
-- Every name is taken in one step, or none: the hold takes them when each is free with
-- nobody queued, or with this waiter at the head of its queue, or reserved for it already.
-- Otherwise a first attempt joins, at the tail, the queue of every name it cannot take, and
-- reserves each name that is free with nobody queued; a later attempt reserves each name
-- whose queue it now heads (its heartbeats renew its places and what is reserved for it).
-- A newcomer never passes a live waiter of any of its names. A hold's fencing token is one for
-- all its names.
--
-- Replies, {status, value} (as lock_acquire.lua's, decoded by DecodeAttempt):
--   {1, token}  acquired every name; the fencing token when ARGV[7] was "1", else 0
--   {3, ms, 0, i...}  queued: wait at most ms before trying again without a message; the
--               names at 0-based indexes i... are held by others (each is published to the
--               waiter's Client on its grant channel when it is reserved for it: see _multi.lua)
--   {3, ms, n, i...}  the same for a first attempt, which joined: n is the length of its
--               longest queue after the join
--   {4, ms}     not acquired and not queued (ARGV[4] "0"); nothing is reserved for it
--   {5, 0}      this waiter was dropped as dead from a queue (or lost a name reserved for
--               it): it gave up everything and must start over under a new hold id
--   error       WRONGTYPE when a key holds a value or type aqs did not write; nothing written
local hold, lease, timeout = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local n = #KEYS / 3
local vals, free = {}, true
for i = 1, n do
  local v = redis.call('GET', KEYS[3 * i - 2])
  if v then
    if not (string.byte(v, 37) == 58 and string.byte(v, 9) == 45) then
      error({err = 'WRONGTYPE the lock key ' .. KEYS[3 * i - 2] .. ' holds a value aqs did not write'})
    end
    free = false
  end
  vals[i] = v
end
if free then
  -- The uncontended path, before any definition is made (each costs the server a closure on
  -- every run): every name free, so nobody live is queued for any (while a live waiter is
  -- queued, the lock key exists: see _lock_value.lua). The token as new_token makes it.
  local token, value = 0, hold
  if ARGV[7] == '1' then
    local t = redis.call('TIME')
    token = tonumber(t[1]) * 1000000 + tonumber(t[2])
    value = hold .. ' t' .. string.format('%d', token)
  end
  for i = 1, n do
    redis.call('SET', KEYS[3 * i - 2], value, 'PX', ARGV[2])
  end
  return {1, token}
end
--@include _multi
local now = server_ms()
local member = hold .. ' ' .. ARGV[3]
local pub = ARGV[6]
local state, all, wait, left, others = multi_state(vals, hold, member, now, pub)
if ARGV[5] ~= '1' and not multi_live(state, member, now) then
  multi_give_up(hold, member, now, pub)
  return {5, 0}
end
if all then
  local token, field = 0, ''
  if ARGV[7] == '1' then
    token, field = new_token()
  end
  for i = 1, n do
    local l, q, d = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
    if state[i] == 'h' then
      redis.call('LPOP', q)
      redis.call('ZREM', d, member)
    end
    set_holder(l, q, d, hold .. field, lease, now)
  end
  return {1, token}
end
wait = math.max(1, wait or timeout)
if ARGV[4] ~= '1' then
  return {4, wait}
end
if ARGV[5] ~= '1' then
  -- A later attempt (most often after one of its names was granted to it) reserves the names
  -- whose queue it now heads, and renews nothing else: its heartbeats keep its places and
  -- what is reserved for it alive (multi_heartbeat.lua), from a third of the waiter timeout
  -- after its join, whose deadline lasts the whole timeout.
  for i = 1, n do
    if state[i] == 'h' then
      redis.call('LPOP', KEYS[3 * i - 1])
      redis.call('ZREM', KEYS[3 * i], member)
      reserve(KEYS[3 * i - 2], hold, now, timeout)
    end
  end
  return {3, wait, 0, unpack(others)}
end
-- The join: first every push, then every deadline, each undone if a key of another type
-- refuses it, so that a refused join leaves nothing (names handed on above were handed on as
-- any attempt would have); only then the reservations and the marks on the lock keys.
local deadline = string.format('%d', now + timeout)
local longest = 0
local pushed = {}
for i = 1, n do
  if state[i] ~= 'f' then
    local r = redis.pcall('RPUSH', KEYS[3 * i - 1], member)
    if type(r) == 'table' and r.err then
      for j = 1, i - 1 do
        if pushed[j] then
          redis.call('RPOP', KEYS[3 * j - 1])
        end
      end
      error(r)
    end
    pushed[i] = r
    if r > longest then
      longest = r
    end
  end
end
for i = 1, n do
  if pushed[i] then
    local r = redis.pcall('ZADD', KEYS[3 * i], deadline, member)
    if type(r) == 'table' and r.err then
      for j = 1, n do
        if pushed[j] then
          redis.call('RPOP', KEYS[3 * j - 1])
          if j < i then
            redis.call('ZREM', KEYS[3 * j], member)
          end
        end
      end
      error(r)
    end
  end
end
for i = 1, n do
  local l, q, d = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
  if pushed[i] then
    if pushed[i] == 1 then
      redis.call('PEXPIRE', q, 2 * timeout)
    else
      extend_ttl(q, 2 * timeout)
    end
    extend_ttl(d, 2 * timeout)
    local v = vals[i]
    mark_waited(l, v, lease_end(v), now, left[i], timeout)
  else
    reserve(l, hold, now, timeout)
  end
end
return {3, wait, longest, unpack(others)}
