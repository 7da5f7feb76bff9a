-- elect_lead: make a hold of an election's lock the leader, with its value (package election).
--
-- KEYS[1]  lock key: the fair lock of the election's name (see lock_acquire.lua)
-- KEYS[2]  the election's leader record, "<base>:e": a hash of the leader's hold id (h), its
--          fencing token (t), the record's revision (r: 1 when the hold began to lead, one
--          more for each Proclaim) and the leader's value (v). It expires with the hold: the
--          hold's renewals extend it (lock_renew.lua). KEYS[2] is also the channel on which
--          every change is published, as "<token> <revision> <hold> <value>"
-- ARGV[1]  hold id
-- ARGV[2]  value
-- ARGV[3]  lease in ms: the record's expiry until the hold's next renewal
-- ARGV[4]  publish command, PUBLISH or SPUBLISH (Redis Cluster)
--
-- A hold leads from this script on, for as long as the lock is its: the record names the
-- holder of the lock, and a record that names anyone else is stale (elect_leader.lua).
-- The fencing token is the lock's (lock_token.lua): assigned here when the hold has none.
--
-- Replies: {token, revision} when the hold leads (a second run for the same hold, after a lost
-- reply, changes nothing and answers the same); 0 when the lock is no longer this hold's.
-- Error WRONGTYPE when the lock key holds a value aqs did not write.
--@include _lock_value
local k, e, hold = KEYS[1], KEYS[2], ARGV[1]
local v = live_value(redis.call('GET', k))
if not v then
  return 0
end
local h, rest = parse_value(v)
if h ~= hold then
  return 0
end
local t = string.match(rest, ' t(%d+)')
if not t then
  local token, field = new_token()
  redis.call('SET', k, with_field(v, field), 'KEEPTTL')
  t = string.format('%d', token)
end
local rec = redis.call('HMGET', e, 'h', 'r')
if rec[1] == hold then
  return {tonumber(t), tonumber(rec[2])}
end
redis.call('DEL', e)
redis.call('HSET', e, 'h', hold, 't', t, 'r', '1', 'v', ARGV[2])
redis.call('PEXPIRE', e, ARGV[3])
redis.call(ARGV[4], e, t .. ' 1 ' .. hold .. ' ' .. ARGV[2])
return {tonumber(t), 1}
