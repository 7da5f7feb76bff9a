-- multi_release: end a hold of several names (package multilock), handing each name on.
--
-- KEYS     the names' triples l, q, d, as multi_acquire.lua takes them
-- ARGV[1]  hold id
-- ARGV[2]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
--
-- Each name the hold still has goes to the live head of its queue, whose Client is told (see
-- hand_off in _lock.lua); with nobody queued it is freed.
--
-- Replies (decoded by DecodeRelease):
--   {1}  released every name
--   {4}  the hold had lost a name (its lease ran out, or it was taken from it): that name is
--        left as it is; the names it still had are released all the same
--   error WRONGTYPE when a key holds a value aqs did not write (checked before any write)
local hold, pub = ARGV[1], ARGV[2]
local n = #KEYS / 3
local vals, plain = {}, true
for i = 1, n do
  local v = redis.call('GET', KEYS[3 * i - 2])
  vals[i] = v
  -- A plain value: the hold's id, and a fencing token perhaps, with no lease end (e) and no
  -- mark that waiters joined (w; see _lock_value.lua).
  if not (v and (v == hold or string.sub(v, 1, #hold + 2) == hold .. ' t') and
      not string.find(v, ' ', #hold + 2, true)) then
    plain = false
  end
end
if plain then
  -- The uncontended release, before any definition is made (each costs the server a closure
  -- on every run): nobody queued for any name since the hold took it.
  for i = 1, n do
    redis.call('DEL', KEYS[3 * i - 2])
  end
  return {1}
end
--@include _lock
local had, now = {}, nil
local lost = false
for i = 1, n do
  local v = vals[i]
  if rest_of(v, hold) then
    had[i] = v
    local e = lease_end(v)
    if e then
      now = now or server_ms()
    end
    if e and e <= now then
      lost = true
      had[i] = nil
    end
  else
    lost = true
  end
end
for i = 1, n do
  if had[i] then
    local l, q, d = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
    if not string.find(had[i], ' w', 38, true) then
      -- Nobody queued for the name since it was taken (a join marks it w, see
      -- _lock_value.lua): it is simply freed.
      redis.call('DEL', l)
    else
      now = now or server_ms()
      hand_off(l, q, d, now, pub)
    end
  end
end
if lost then
  return {4}
end
return {1}
