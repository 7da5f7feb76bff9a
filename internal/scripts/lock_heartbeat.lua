-- lock_heartbeat: keep a waiter alive in the queue (its Client sends these in batches).
--
-- KEYS[1]  lock key l, KEYS[2] queue list q, KEYS[3] deadline zset d (see _lock.lua)
-- ARGV[1]  hold id
-- ARGV[2]  lease in ms it asked for (with ARGV[1], its queue member)
-- ARGV[3]  waiter timeout in ms
--
-- Replies (the statuses of every heartbeat script; internal/scripts decodes them in
-- DecodeBeat): 1 still queued (its deadline is now + timeout); 2 the lock is this hold's:
-- handed to it (the heartbeat doubles as the fallback for a lost grant message), or it was
-- the live head of a free lock and took it (granted as by a release: see grant in _lock.lua);
-- 0 it is no longer queued (a waiter whose deadline passed is dropped, not revived).
--@include _lock
return beat_waiter(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[1] .. ' ' .. ARGV[2], tonumber(ARGV[3]),
  server_ms())
