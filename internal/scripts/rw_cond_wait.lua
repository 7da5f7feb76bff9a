-- rw_cond_wait: a Condition's Wait on the write side of a read-write lock: end the write hold
-- whatever its count, and queue a new hold on the condition, in one step (see cond_wait.lua).
--
-- KEYS[1] w, KEYS[2] r, KEYS[3] rn, KEYS[4] q, KEYS[5] d (see _rw.lua)
-- KEYS[6]  the condition's list cq, KEYS[7] its deadline zset cd
-- ARGV[1]  hold id
-- ARGV[2]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[3]  the condition's new member "<new hold id> <lease ms> x"
-- ARGV[4]  waiter timeout in ms
--
-- Replies: as rw_write_release.lua's ending of a hold ({1, hold ids granted to waiters of the
-- caller's Client...}); {4} when w does not hold this hold, and then nothing changed.
--@include _rw
local w, r, rn, q, d = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local hold = ARGV[1]
if not rest_of(redis.call('GET', w), hold) then
  return {4}
end
local now = server_ms()
join(KEYS[6], KEYS[7], ARGV[3], now, tonumber(ARGV[4]), true)
redis.call('DEL', w)
local mine = tell(serve(w, r, q, d, now), w, ARGV[2], string.sub(hold, 1, 36))
table.insert(mine, 1, 1)
return mine
