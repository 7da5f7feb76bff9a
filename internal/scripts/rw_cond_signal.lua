-- rw_cond_signal: a Condition's Signal or SignalAll on the write side of a read-write lock:
-- move the condition's longest waiting live waiter (or all, in order) onto the tail of the
-- lock's queue, and serve the queue (see cond_signal.lua).
--
-- KEYS[1] w, KEYS[2] r, KEYS[3] rn, KEYS[4] q, KEYS[5] d (see _rw.lua)
-- KEYS[6]  the condition's list cq, KEYS[7] its deadline zset cd
-- ARGV[1]  "1" to move one waiter, "0" to move all
-- ARGV[2]  waiter timeout in ms
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[4]  the caller's Client id: grants to its waiters are not published but returned
--
-- Replies: {moved, hold ids granted to waiters of the caller's Client...}.
--@include _rw
local w, r, q, d = KEYS[1], KEYS[2], KEYS[4], KEYS[5]
local timeout = tonumber(ARGV[2])
local now = server_ms()
local moved = transfer(KEYS[6], KEYS[7], q, d, now, timeout, ARGV[1] == '1')
local mine = {}
if moved > 0 then
  mine = tell(serve(w, r, q, d, now), w, ARGV[3], ARGV[4])
end
table.insert(mine, 1, moved)
return mine
