-- rw_wake_writer: wake a waiting writer if no live reader is left (a reader's release that ran
-- as plain commands found the WAITING marker).
--
-- KEYS[1] w, KEYS[2] r (see _rw.lua)
-- ARGV[1]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
--
-- Replies: 1 a writer was woken ("1" published on the writers' channel); 0 not.
--@include _rw
if wake_writer(KEYS[1], KEYS[2], server_ms(), ARGV[1]) then
  return 1
end
return 0
