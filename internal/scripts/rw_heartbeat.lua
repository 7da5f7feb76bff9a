-- rw_heartbeat: keep a waiter of a read-write lock alive in the queue (its Client sends these
-- in batches); it also serves the queue, so that a head whose turn came while no release ran
-- (the holders' leases ran out) is served without waiting for one.
--
-- KEYS[1] w, KEYS[2] r, KEYS[3] rn, KEYS[4] q, KEYS[5] d (see _rw.lua)
-- ARGV[1]  hold id
-- ARGV[2]  lease in ms it asked for
-- ARGV[3]  "s" for a reader, "x" for a writer (with ARGV[1] and ARGV[2], its queue member)
-- ARGV[4]  waiter timeout in ms
-- ARGV[5]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
--
-- Replies (DecodeBeat): 1 still queued (its deadline is now + timeout); 2 it holds what it
-- waits for (the heartbeat doubles as the fallback for a lost grant message); 0 it is no
-- longer queued (a waiter whose deadline passed is dropped, not revived).
--@include _rw
local hold, mode = ARGV[1], ARGV[3]
return beat_rw_waiter(KEYS[1], KEYS[2], KEYS[4], KEYS[5], hold, mode, hold .. ' ' .. ARGV[2] .. ' ' .. mode,
  tonumber(ARGV[4]), ARGV[5], server_ms())
