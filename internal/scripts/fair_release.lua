-- fair_release: count one hold of a fair lock down, or end it and hand the lock to the live
-- head of the queue.
--
-- KEYS[1]  lock key, KEYS[2] queue list, KEYS[3] deadline zset (see fair_acquire.lua)
-- ARGV[1]  hold id
-- ARGV[2]  "1" to end the hold whatever its count, "0" to count one down
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
--
-- Replies: n >= 1 holds left; 0 released (handed to the next live waiter, whose Client alone
-- is notified, or freed); a hold id: released and handed to that waiter, which is of the
-- caller's own Client and was not notified (the caller tells it); -1 the key does not hold
-- this hold, nothing changed. Error WRONGTYPE when the key holds a value aqs did not write.
--@include _fair_queue
local l, q, d = KEYS[1], KEYS[2], KEYS[3]
local hold = ARGV[1]
local v = redis.call('GET', l)
if v == hold and ARGV[2] == '1' then
  redis.call('DEL', l) -- no w: nobody waits
  return 0
end
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
