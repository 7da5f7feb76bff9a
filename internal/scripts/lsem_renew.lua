-- lsem_renew: extend, or only check, one leased permit (the watchdog's call, and SetLease's).
--
-- KEYS[1] p, KEYS[2] pn (see _lsem.lua)
-- KEYS[3] optional: pr (see _lsem.lua), the marks of permits released by their id
-- KEYS[4] optional, for a semaphore with an expiry (see keep_leased in _sem.lua): s, kept
--         at least as long as the permit's new lease (and p), so that a permit its holder
--         renews keeps the semaphore
-- ARGV[1]  permit id
-- ARGV[2]  lease in ms from now, or 0 to check that the permit is still live without extending
--          it
-- ARGV[3]  optional, with KEYS[4]: the semaphore's expiry in ms, for a call (SetLease) rather
--          than the watchdog's renewal: s lives at least that long too
--
-- Each permit's lease is its own score: renewing one never extends another.
--
-- Replies: 1 the permit is live (and its lease set when ARGV[2] > 0); 0 it is gone; 2 it is gone
-- because a release by its id ended it (lsem_release_id.lua; only with KEYS[3]).
--@include _lsem
local sc = redis.call('ZSCORE', KEYS[1], ARGV[1])
local now = server_ms()
if not sc or tonumber(sc) <= now then
  local mark = KEYS[3] and redis.call('ZSCORE', KEYS[3], ARGV[1])
  if mark and tonumber(mark) > now then
    return 2
  end
  return 0
end
if ARGV[2] ~= '0' then
  redis.call('ZADD', KEYS[1], 'XX', string.format('%d', now + tonumber(ARGV[2])), ARGV[1])
  keep_permits(KEYS[1], KEYS[2], tonumber(ARGV[2]), true)
  if KEYS[4] then
    extend_ttl(KEYS[4], math.max(tonumber(ARGV[2]) + 1000, tonumber(ARGV[3]) or 0))
  end
end
return 1
