-- rw_writer_give_up: a waiting writer stops waiting (its context ended, or its wait bound).
--
-- KEYS[1] w, KEYS[2] ww, KEYS[3] rw (see _rw.lua)
-- ARGV[1]  hold id
-- ARGV[2]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
--
-- Readers that wait behind it (the fair mode) are woken when it was the last live waiting
-- writer and no writer holds.
--
-- Replies: 1 readers were woken; 0 not.
--@include _rw
local w, ww, rw = KEYS[1], KEYS[2], KEYS[3]
redis.call('ZREM', ww, ARGV[1])
local v = redis.call('GET', w)
if v and v ~= WAITING then
  return 0 -- a writer holds: its release wakes the readers
end
if mark_waiting(w, ww, server_ms()) then
  return 0
end
if wake_readers(w, rw, ARGV[2]) then
  return 1
end
return 0
