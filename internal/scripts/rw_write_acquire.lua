-- rw_write_acquire: one attempt of a new write hold on a read-write lock.
--
-- KEYS[1] w, KEYS[2] r, KEYS[3] rn, KEYS[4] ww (see _rw.lua)
-- ARGV[1]  hold id
-- ARGV[2]  lease in ms (> 0)
-- ARGV[3]  writer timeout in ms: how long a waiting writer stays live without being heard of
-- ARGV[4]  "1" when the caller will wait: a failed attempt records it as a waiting writer (in
--          the fair mode, readers then wait behind it), "0" not to
-- ARGV[5]  "1" to assign the fencing token now (see lock_token.lua), "0" not to
--
-- The write side is taken only when no writer holds and no reader's lease is live. Writers
-- are not ordered among themselves: any waiting writer may win.
--
-- Replies: >= 1 acquired (the fencing token when ARGV[5] was "1", else 1; also when this hold
-- has the write side already: the same attempt run again); < 0 not acquired,
-- -1 - reply ms until the lock may change hands without a message (the writer's remaining
-- lease, or the nearest reader lease end). Error WRONGTYPE when w holds a value aqs did not
-- write.
--@include _rw
local w, r, rn, ww = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local hold, timeout = ARGV[1], tonumber(ARGV[3])
local v = redis.call('GET', w)
local now = server_ms()
local held = v and v ~= WAITING
local wait
if held then
  local h, rest = parse_value(v)
  if h == hold then
    -- This attempt ran already and took the lock (go-redis re-sends a command whose reply a
    -- broken connection lost): acquired, with the token it assigned, if any.
    return tonumber(string.match(rest, ' t(%d+)')) or 1
  end
  wait = redis.call('PTTL', w)
else
  local e = live_first(r, now)
  if e then
    wait = e - now
  else
    -- No live reader: what is left in r and rn belongs to readers whose leases ran out.
    -- HLEN first: a key of another type at rn is reported (WRONGTYPE), not deleted.
    if redis.call('HLEN', rn) > 0 then
      redis.call('DEL', r, rn)
    else
      redis.call('DEL', r)
    end
    redis.call('ZREM', ww, hold)
    local value, reply = hold, 1
    if ARGV[5] == '1' then
      local field
      reply, field = new_token()
      value = value .. field
    end
    redis.call('SET', w, value, 'PX', ARGV[2])
    return reply
  end
end
if ARGV[4] == '1' then
  local deadline = now + timeout
  redis.call('ZADD', ww, string.format('%d', deadline), hold)
  redis.call('PEXPIRE', ww, 2 * timeout)
  if not held and redis.call('PTTL', w) < timeout then
    redis.call('SET', w, WAITING, 'PX', timeout)
  end
end
if wait < 1 then
  wait = 1
end
return -1 - wait
