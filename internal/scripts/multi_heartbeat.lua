-- multi_heartbeat: keep a waiter for several names alive (package multilock; its Client
-- sends these in batches).
--
-- KEYS     the names' triples l, q, d, as multi_acquire.lua takes them
-- ARGV[1]  hold id
-- ARGV[2]  waiter timeout in ms (with ARGV[1], its queue member)
-- ARGV[3]  publish command: PUBLISH, or SPUBLISH on Redis Cluster
--
-- It renews the waiter's place in every queue, extends the names reserved for it, and
-- reserves the free names whose queue it heads, publishing each as a grant (see _multi.lua).
--
-- Replies (as DecodeBeat decodes them): 1 still queued; 2 every name is reserved for it
-- now (or held by it: then nothing is written): it holds them all, for its waiter timeout
-- at least from its last heartbeat that replied 1, and sets its own lease; 0 it is no
-- longer a live waiter (dropped as dead from a queue): it gave up everything.
--@include _multi
local hold, timeout = ARGV[1], tonumber(ARGV[2])
local member = hold .. ' ' .. ARGV[2]
local now = server_ms()
local vals = {}
for i = 1, #KEYS / 3 do
  vals[i] = redis.call('GET', KEYS[3 * i - 2])
end
local state, all = multi_state(vals, hold, member, now, ARGV[3])
local mine = all
for i = 1, #KEYS / 3 do
  mine = mine and state[i] == 'r'
end
if mine then
  -- Every name is the hold's already: reserved, or held since (a heartbeat sent just before
  -- the attempt that took them, or before the grant that completed them, may arrive after
  -- it). Nothing is written: a hold's lease is its watchdog's to set.
  return 2
end
if not multi_live(state, member, now) then
  multi_give_up(hold, member, now, ARGV[3])
  return 0
end
multi_wait(state, hold, member, now, timeout, ARGV[3])
if all then
  return 2
end
return 1
