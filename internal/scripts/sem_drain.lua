-- sem_drain: take every permit available now from a counting semaphore.
--
-- KEYS[1] s (see _sem.lua and _csem.lua)
--
-- Replies: the permits taken (0 when never set).
--@include _csem
local c = counts(KEYS[1])
if not c.total or c.avail <= 0 then
  return 0
end
local taken = c.avail
c.avail = 0
save(KEYS[1], c)
return taken
