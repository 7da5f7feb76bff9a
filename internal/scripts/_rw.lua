-- _rw: the read-write lock's keys, a fragment included by every rw_* script.
--
-- A read-write lock named n has, all in n's slot:
--   w   "aqs:{n}"      the write side: an exclusive-lock value (see _lock_value.lua) while a
--                      writer holds, its TTL the writer's lease; while no writer holds but a
--                      live writer waits, the marker WAITING, living as long as the latest
--                      waiting writer's deadline. So one GET tells a reader both whether a
--                      writer holds and whether one waits.
--   r   "aqs:{n}:r"    a zset of read holds scored by their lease end (server time, ms): each
--                      reader has its own lease, and a reader is live while its score > now
--   rn  "aqs:{n}:rn"   a hash of read holds that were re-entered: hold -> re-entries (a hold
--                      absent here holds once)
--   ww  "aqs:{n}:ww"   a zset of waiting writers scored by their liveness deadline (server
--                      time, ms), refreshed by their attempts and their Client's heartbeats
--   rw  "aqs:{n}:rw"   a flag: a reader is waiting (for a writer to release, or to give up)
-- and two channels: w .. ":rch" (a write release wakes every waiting reader with one "*") and
-- w .. ":wch" (the last reader's release wakes one writer per Client with "1").
--
-- Every question is answered by a point lookup or by the first entry of a range, never by a
-- scan: the cost of an operation does not grow with the number of readers.
--@include _lock_value

-- WAITING is w's value while writers wait and none holds: shaped as a hold id that no Client
-- ever makes (the nil UUID, sequence 0), so that the exclusive-lock scripts (renewal, token,
-- re-entry) see a hold that is not theirs.
local WAITING = '00000000-0000-0000-0000-000000000000:0'

-- live_first returns the score of the first entry of zset z whose score is above now (the
-- nearest live lease end, or a live waiting writer's deadline), or nil.
local function live_first(z, now)
  local e = redis.call('ZRANGEBYSCORE', z, '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if e[2] then
    return tonumber(e[2])
  end
  return nil
end

-- latest returns the highest score in zset z (the last waiting writer's deadline), or nil.
local function latest(z)
  local e = redis.call('ZRANGE', z, -1, -1, 'WITHSCORES')
  if e[2] then
    return tonumber(e[2])
  end
  return nil
end

-- keep_alive makes key k live at least ms more, extending it to twice that when it would not
-- (so that a stream of holds extends it once in a while, not on every call).
local function keep_alive(k, ms)
  if redis.call('PTTL', k) < ms then
    redis.call('PEXPIRE', k, 2 * ms)
  end
end

-- mark_waiting makes w the WAITING marker until the latest live waiting writer's deadline, or
-- removes it when no live writer waits; only while no writer holds. It returns whether a live
-- writer waits.
local function mark_waiting(w, ww, now)
  local d = latest(ww)
  if d and d > now then
    redis.call('SET', w, WAITING, 'PX', string.format('%d', d - now))
    return true
  end
  redis.call('DEL', w, ww)
  return false
end

-- wake_writer publishes "1" on the writers' channel when w is the WAITING marker (a live
-- writer waits and none holds) and no live reader is left.
local function wake_writer(w, r, now, pub)
  if redis.call('GET', w) == WAITING and not live_first(r, now) then
    redis.call(pub, w .. ':wch', '1')
    return true
  end
  return false
end

-- wake_readers publishes "*" on the readers' channel when a reader waits (and clears the
-- flag).
local function wake_readers(w, rw, pub)
  if redis.call('DEL', rw) == 1 then
    redis.call(pub, w .. ':rch', '*')
    return true
  end
  return false
end
