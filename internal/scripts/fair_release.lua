-- fair_release: count one hold of a fair lock down, or end it and hand the lock to the live
-- head of the queue.
--
-- KEYS[1]  lock key, KEYS[2] queue list, KEYS[3] deadline zset (see fair_acquire.lua)
-- ARGV[1]  hold id
-- ARGV[2]  "1" to end the hold whatever its count, "0" to count one down
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[4]  (optional, with ARGV[5..]) waiter timeout in ms of the riders
-- ARGV[5..] (optional) riders: members "<hold id> <lease ms>" of new waiters of the caller's
--          Client, in the order they asked, that join the queue's tail with this release
--          before the lock is handed on (see fair/ride.go). They join only on the release of a
--          plain hold (no count, no token: the fast path below); otherwise the reply is one of
--          the plain ones below and they join on their own.
--
-- Replies: n >= 1 holds left; 0 released (handed to the next live waiter, whose Client alone
-- is notified, or freed); a hold id: released and handed to that waiter, which is of the
-- caller's own Client and was not notified (the caller tells it); -1 the key does not hold
-- this hold, nothing changed. With riders that joined: {hold id, lease ms} when handed to a
-- waiter of the caller's Client (not notified), {"", lease ms} when handed to another Client's
-- waiter (notified), where lease is the new holder's. Error WRONGTYPE when the key holds a
-- value aqs did not write.
local l, q, d = KEYS[1], KEYS[2], KEYS[3]
local hold = ARGV[1]
local v = redis.call('GET', l)
if ARGV[2] == '1' and v then
  local riders = ARGV[5] ~= nil
  if v == hold and not riders then
    redis.call('DEL', l) -- no w: nobody waits
    return 0
  end
  local n = #hold
  if v == hold or (string.sub(v, n + 1, n + 4) == ' w e' and string.sub(v, 1, n) == hold) then
    -- The release of a contended lock: a hold as grant (in _fair_queue.lua) writes it, with no
    -- count and no token, handed to the live head. Written out here, as hand_off does it,
    -- before any definition is made (each costs the server a closure on every run, and this
    -- is the critical path of a contended lock: BenchmarkFairContended).
    local t = redis.call('TIME')
    local now = t[1] * 1000 + math.floor(t[2] / 1000)
    if v ~= hold and tonumber(string.sub(v, n + 5)) <= now then
      return -1 -- its lease ran out: a waiter may take the lock at any moment
    end
    local keep = 0
    if riders then
      -- The riders join at the tail as fair_acquire.lua's join does, all in two calls (their
      -- hold ids are fresh: none is queued already), and the key then outlives the new
      -- holder's lease long enough for them (as a join behind a holder keeps it).
      local timeout = tonumber(ARGV[4])
      local deadline = string.format('%d', now + timeout)
      local za = {}
      for i = 5, #ARGV do
        za[#za + 1] = deadline
        za[#za + 1] = ARGV[i]
      end
      redis.call('ZADD', d, unpack(za))
      if redis.call('RPUSH', q, unpack(ARGV, 5)) == #ARGV - 4 then
        redis.call('PEXPIRE', q, 2 * timeout)
        redis.call('PEXPIRE', d, 2 * timeout)
      else
        redis.call('PEXPIRE', d, 2 * timeout, 'NX') -- d is new behind ghosts
      end
      keep = 2 * timeout
    end
    while true do
      local m = redis.call('LPOP', q)
      if not m then
        redis.call('DEL', l)
        return 0
      end
      local s = redis.call('ZSCORE', d, m)
      if s then
        redis.call('ZREM', d, m)
        s = tonumber(s)
        if s > now then
          local sp = string.find(m, ' ', 38, true)
          local next = string.sub(m, 1, sp - 1)
          local lease = math.min(tonumber(string.sub(m, sp + 1)), s - now)
          redis.call('SET', l, next .. ' w e' .. string.format('%d', now + lease),
            'PX', string.format('%d', lease + math.max(2 * (s - now), lease, keep)))
          local client = string.sub(next, 1, 36)
          if client == string.sub(hold, 1, 36) then
            if riders then
              return {next, lease}
            end
            return next
          end
          redis.call(ARGV[3], l .. ':c:' .. client, next)
          if riders then
            return {'', lease}
          end
          return 0
        end
      end
    end
  end
end
--@include _fair_queue
local rest = rest_of(v, hold)
if not rest then
  return -1
end
local now
local e = lease_end(v)
if e then
  now = now_ms()
  if e <= now then
    return -1 -- its lease ran out: a waiter may take the lock at any moment
  end
end
local n = hold_count(rest)
if ARGV[2] == '0' and n > 1 then
  redis.call('SET', l, with_count(hold, rest, n - 1), 'KEEPTTL')
  return n - 1
end
local granted, tell = hand_off(l, q, d, now or now_ms(), ARGV[3], hold)
if tell then
  return granted
end
return 0
