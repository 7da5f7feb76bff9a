-- rw_writer_heartbeat: keep a waiting writer live (its Client sends these in batches).
--
-- KEYS[1] w, KEYS[2] ww (see _rw.lua)
-- ARGV[1]  hold id
-- ARGV[2]  writer timeout in ms
--
-- Replies: 1 still waiting (live until now + timeout); 0 not waiting (a writer whose deadline
-- passed is dropped, not revived).
--@include _rw
local w, ww, hold, timeout = KEYS[1], KEYS[2], ARGV[1], tonumber(ARGV[2])
local s = redis.call('ZSCORE', ww, hold)
local now = server_ms()
if not s then
  return 0
end
if tonumber(s) <= now then
  redis.call('ZREM', ww, hold)
  return 0
end
redis.call('ZADD', ww, string.format('%d', now + timeout), hold)
redis.call('PEXPIRE', ww, 2 * timeout)
local v = redis.call('GET', w)
if not v or v == WAITING then
  redis.call('SET', w, WAITING, 'PX', timeout)
end
return 1
