-- rw_serve: serve a read-write lock's queue (a reader's release made of plain commands found
-- it not empty).
--
-- KEYS[1] w, KEYS[2] r, KEYS[3] q, KEYS[4] d (see _rw.lua)
-- ARGV[1]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[2]  the caller's Client id: its grants are returned, not published
--
-- Replies (DecodeRelease): {1, hold ids granted to waiters of the caller's Client...}.
--@include _rw
local mine = tell(serve(KEYS[1], KEYS[2], KEYS[3], KEYS[4], server_ms()), KEYS[1], ARGV[1], ARGV[2])
table.insert(mine, 1, 1)
return mine
