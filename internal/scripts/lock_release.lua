-- lock_release: count one hold of an exclusive lock down, or end the hold.
--
-- KEYS[1]  lock hash (see lock_acquire.lua)
-- ARGV[1]  owner id
-- ARGV[2]  "1" to end the hold whatever its count (the caller's last acquisition), "0" to
--          count one down
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[4]  channel to notify when the lock becomes free
-- ARGV[5]  how long (ms) the hash keeps the last fencing token after the release
--
-- Replies:
--   n >= 1  holds left
--   0       released; one waiter was notified ("1" = wake one)
--   -1      the lock is not held by this owner; nothing changed
local h = KEYS[1]
if redis.call('HGET', h, 'o') ~= ARGV[1] then
  return -1
end
if ARGV[2] == '0' then
  local n = redis.call('HINCRBY', h, 'n', -1)
  if n > 0 then
    return n
  end
end
redis.call('HDEL', h, 'o', 'n')
redis.call('PEXPIRE', h, ARGV[5])
redis.call(ARGV[3], ARGV[4], '1')
return 0
