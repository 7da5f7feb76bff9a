-- _multi: the multi-name lock (package multilock), a fragment included by the multi_* scripts.
--
-- A multi-name hold is one hold id on several names at once, each name an exclusive lock of
-- its own, with the keys of _lock.lua (l, q, d): the same lock that the fair and the
-- reentrant lock of that name are. KEYS are the names' triples l, q, d, in one fixed order
-- (all in one slot on Redis Cluster).
--
-- A waiter for several names is queued in the queue of every name it cannot have at once, all
-- of them joined by one script: so every queue orders the waiters by one arrival order, which
-- is what makes the lock fair and free of deadlocks. Its member is "<hold id> <timeout ms>".
-- A release of one of its names (any script's hand_off in _lock.lua) grants the name to it as
-- to any live head, with a lease that runs to its liveness deadline: the name is reserved for
-- it. Its own attempts reserve a name that is free with it at the head (or nobody queued,
-- when it joins), and its attempts and heartbeats extend its reserved names with its
-- liveness. It holds once every name is reserved for it or free with it at the head. A
-- waiter found dead in any queue gives up everything and starts over, as every waiter does.
--
-- Every name reserved for a waiter after the attempt that queued it is published on the name's
-- grant channel, as any grant is: an attempt that queues reports which names it misses, and
-- once a grant of each of them has come, its Client holds every name without another attempt
-- (each reserved name's lease runs to its liveness deadline, renewed by its heartbeats).
--
-- Waits go one way only: a waiter waits for names reserved for, or held by, waiters that
-- joined before it (every queue it shares with them has them ahead), so no cycle of waits can
-- form.
--@include _lock

-- reserve makes hold the holder of l while it waits for its other names: for timeout ms, its
-- liveness, the key living on at least three times that (for the waiters behind it).
local function reserve(l, hold, now, timeout)
  redis.call('SET', l, hold .. ' w e' .. string.format('%d', now + timeout), 'PX',
    string.format('%d', math.max(redis.call('PTTL', l), 3 * timeout)))
end

-- multi_state reads the names' state for hold, queued as member: state[i] is 'r' when name i
-- is held by or reserved for hold, 'h' when it is free with hold the live head of its queue,
-- 'f' when it is free with nobody queued, false otherwise. A free name kept for another live
-- head is handed to that head (as lock_acquire.lua does). vals are the names' values, read
-- already (GET); for a name held by another, vals[i] is set to its live value and left[i] to
-- its remaining lease. It returns the states, whether every one is 'r', 'h' or 'f', the
-- shortest remaining lease of a name held by another (or nil), left, and the 0-based indexes
-- of the names held by others.
local function multi_state(vals, hold, member, now, pub)
  local state, all, wait, left, others = {}, true, nil, {}, {}
  for i = 1, #KEYS / 3 do
    local l, q, d = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
    local v = live_value(vals[i], now)
    if v and owns(v, hold) then
      state[i] = 'r'
    else
      if not v then
        local head = live_head(q, d, now)
        if not head then
          state[i] = 'f'
        elseif head == member then
          state[i] = 'h'
        else
          hand_off(l, q, d, now, pub)
          v = redis.call('GET', l)
        end
      end
      if v then
        state[i] = false
        all = false
        others[#others + 1] = i - 1
        local w = remaining(l, v, now)
        vals[i], left[i] = v, w
        if not wait or w < wait then
          wait = w
        end
      end
    end
  end
  return state, all, wait, left, others
end

-- multi_give_up leaves nothing of hold, queued as member, in Redis: it leaves every queue, and
-- every name it holds or that is reserved for it, or kept for it at the head of the queue,
-- passes on to the next live waiter. It returns 2 when it had a name, 1 when it was queued
-- and live, 0 when neither.
local function multi_give_up(hold, member, now, pub)
  local had = 0
  for i = 1, #KEYS / 3 do
    local l, q, d = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
    local s = redis.call('ZSCORE', d, member)
    local v = live_value(redis.call('GET', l), now)
    if s then
      local head = not v and live_head(q, d, now) == member
      redis.call('ZREM', d, member)
      if head then
        hand_off(l, q, d, now, pub)
      end
      if tonumber(s) > now and had == 0 then
        had = 1
      end
    elseif v and owns(v, hold) then
      hand_off(l, q, d, now, pub)
      had = 2
    end
  end
  return had
end

-- multi_wait goes on waiting after a heartbeat found state (see multi_state): a name at whose
-- head it is is reserved now, and published to its Client on the name's channel as any grant
-- is (with pub), a reserved one is extended, and its place in every other queue is renewed
-- with the lock key kept alive behind the holder.
local function multi_wait(state, hold, member, now, timeout, pub)
  local deadline = string.format('%d', now + timeout)
  for i = 1, #KEYS / 3 do
    local l, q, d = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
    if state[i] == 'h' then
      redis.call('LPOP', q)
      redis.call('ZREM', d, member)
      reserve(l, hold, now, timeout)
      redis.call(pub, l .. ':c:' .. string.sub(hold, 1, 36), hold)
    elseif state[i] == 'r' then
      reserve(l, hold, now, timeout)
    else
      redis.call('ZADD', d, deadline, member)
      keep_queue(q, d, timeout)
      local v = live_value(redis.call('GET', l), now)
      local e = v and lease_end(v)
      if e then
        keep_lock(l, e - now, timeout)
      end
    end
  end
end

-- multi_live reports whether hold, queued as member, is still a live waiter: every name not
-- reserved for it (state, see multi_state) has it queued and live.
local function multi_live(state, member, now)
  for i = 1, #KEYS / 3 do
    if state[i] ~= 'r' then
      local s = redis.call('ZSCORE', KEYS[3 * i], member)
      if not s or tonumber(s) <= now then
        return false
      end
    end
  end
  return true
end
