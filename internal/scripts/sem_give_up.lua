-- sem_give_up: a waiter of a counting semaphore stops waiting (its context ended, or its
-- wait bound); permits granted to it in the same instant go back, to the next waiters.
--
-- KEYS[1] s, KEYS[2] q, KEYS[3] d, KEYS[4] g (see _sem.lua and _csem.lua)
-- ARGV[1]  hold id
-- ARGV[2]  n, the permits it asked for; 0 for a grant given back by a Client that no longer
--          uses the hold id (see internal/core/orphan.go), whose count the Client does not
--          know: the grant is found by the hold id among the grants not collected (g is short)
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
-- ARGV[4]  optional: the semaphore's expiry in ms (absent or "0": none), see keep_counting in
--          _sem.lua
--
-- Replies (DecodeSem): {0, permits given back, hold ids granted to waiters of the caller's
-- Client (not published)...}.
--@include _csem
local s, q, d, g = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local hold, n = ARGV[1], tonumber(ARGV[2])
if n == 0 then
  local prefix = hold .. ' '
  for _, m in ipairs(redis.call('ZRANGE', g, 0, -1)) do
    if string.sub(m, 1, #prefix) == prefix then
      n = tonumber(string.sub(m, #prefix + 1))
      break
    end
  end
end
local member = hold .. ' ' .. n
local now = server_ms()
leave(q, d, member, now)
local back = 0
if take_grant(g, member, now) then
  back = n
end
local c = counts(s)
if not c.total then
  return {0, 0}
end
c.avail = c.avail + back
local mine = {}
if c.gated then
  mine = serve(s, q, d, g, c, now, ARGV[3], string.sub(hold, 1, 36))
end
save(s, c)
--@inline keep_counting(ARGV[4])
table.insert(mine, 1, 0)
table.insert(mine, 2, back)
return mine
