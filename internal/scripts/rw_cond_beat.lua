-- rw_cond_beat: keep a Condition's waiter on the write side of a read-write lock alive, on the
-- condition while it waits for a Signal, then on the lock's queue (see cond_beat.lua).
--
-- KEYS[1] w, KEYS[2] r, KEYS[3] rn, KEYS[4] q, KEYS[5] d (see _rw.lua)
-- KEYS[6]  the condition's list cq, KEYS[7] its deadline zset cd
-- ARGV[1]  hold id
-- ARGV[2]  lease in ms it asked for
-- ARGV[3]  waiter timeout in ms
-- ARGV[4]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
--
-- Replies: as rw_heartbeat.lua's (1 still waiting, 2 it holds the write side, 0 no longer
-- queued), whether it waits on the condition or on the lock's queue.
--@include _rw
local w, r, q, d = KEYS[1], KEYS[2], KEYS[4], KEYS[5]
local hold, timeout = ARGV[1], tonumber(ARGV[3])
local member = hold .. ' ' .. ARGV[2] .. ' x'
local now = server_ms()
if redis.call('ZSCORE', KEYS[7], member) then
  if join(KEYS[6], KEYS[7], member, now, timeout, false) then
    return 1
  end
  return 0
end
return beat_rw_waiter(w, r, q, d, hold, 'x', member, timeout, ARGV[4], now) -- on the lock's queue
