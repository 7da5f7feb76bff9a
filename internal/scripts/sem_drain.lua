-- sem_drain: take every permit available now from a counting semaphore.
--
-- KEYS[1] s (see _sem.lua and _csem.lua)
-- ARGV[1] optional: the semaphore's expiry in ms (absent or "0": none), see keep_hash in
--         _sem.lua
--
-- Replies: the permits taken (0 when never set).
--@include _csem
local c = counts(KEYS[1])
if not c.total then
  return 0
end
local taken = 0
if c.avail > 0 then
  taken = c.avail
  c.avail = 0
  save(KEYS[1], c)
end
keep_hash(ARGV[1])
return taken
