-- _queue: the wait queue, the one queue discipline of every primitive that queues (the locks,
-- the read-write lock, the semaphores); a fragment included by their scripts.
--
-- The queue is two keys in the primitive's slot:
--   q  a list of members in arrival order; a member starts with the waiter's hold id and a
--      space, and the rest is the primitive's (the lease it asks for, its permits, read or
--      write: internal/layout parses every kind)
--   d  a zset of the same members scored by their liveness deadline (server time, ms).
-- A waiter is live while now < its deadline; its Client refreshes the deadline in batches
-- (the heartbeat scripts), and each of its attempts does too. A waiter that gave up is removed
-- from d only (ZREM is O(log N), LREM would be O(N)); its list entry is a ghost that is
-- dropped when it reaches the head. A waiter whose deadline passed is dead: it is never
-- revived, and its next attempt or heartbeat tells it to join again under a new hold id. Only
-- the head is ever examined, so every operation is O(log N) in the queue length and no score
-- is ever rewritten for anyone else.
--
-- A grant goes to the waiter's own Client only, on the channel "<base key>:c:<Client id>",
-- whose message is the granted hold ids, separated by spaces; a grant to a waiter of the
-- calling Client is not published but returned to the caller, which tells the waiter itself.
--@include _time

-- live_head drops dead waiters and ghosts at the head of the queue and returns the live
-- head's member m and its liveness deadline, or nil when no live waiter is left. The head stays
-- queued.
--@block live_head(q, d, now) -> m, deadline
while true do
  local h = redis.call('LINDEX', q, 0)
  if not h then
    break
  end
  local s = tonumber(redis.call('ZSCORE', d, h))
  if s and s > now then
    m, deadline = h, s
    break
  end
  redis.call('LPOP', q)
  redis.call('ZREM', d, h)
end
--@end

-- pop_live_head takes the live head off the queue (dropping dead waiters and ghosts before it)
-- and returns its member m and liveness deadline, or nil when no live waiter is left.
--@block pop_live_head(q, d, now) -> m, deadline
while true do
  local h = redis.call('LPOP', q)
  if not h then
    break
  end
  local s = redis.call('ZSCORE', d, h)
  if s then
    redis.call('ZREM', d, h)
    s = tonumber(s)
    if s > now then
      m, deadline = h, s
      break
    end
  end
end
--@end

-- keep_queue makes the queue's keys live at least twice the timeout from now (a join's and a
-- heartbeat's refresh): an abandoned queue goes away on its own, and a live waiter's entry
-- never does. GT, so that a longer life another waiter gave them is kept.
--@block keep_queue(q, d, timeout)
--@inline extend_ttl(q, 2 * timeout)
--@inline extend_ttl(d, 2 * timeout)
--@end

-- queued ends the join of n fresh members: pushed onto the list q first (pushed is the list's
-- length after the RPUSH: on a key of another type there, the push fails before anything is
-- written), then added to the deadlines d (added is the ZADD's redis.pcall reply). When d
-- holds another type, it takes the n back off the list before it raises the error, so that a
-- failed join leaves nothing; else it keeps the queue alive (see keep_queue; a list the push
-- made has no TTL to keep).
--@block queued(q, d, n, pushed, added, timeout)
if type(added) == 'table' and added.err then
  redis.call('RPOP', q, n)
  error(added)
end
if pushed == n then
  redis.call('PEXPIRE', q, 2 * timeout)
else
  --@inline extend_ttl(q, 2 * timeout)
end
--@inline extend_ttl(d, 2 * timeout)
--@end

-- join_fresh puts member, a hold's first attempt (it cannot be queued already), at the tail of
-- the queue with the liveness deadline deadline (ms, a formatted integer), and returns the
-- list's length after it.
--@block join_fresh(q, d, member, deadline, timeout) -> pushed
pushed = redis.call('RPUSH', q, member) -- first, and undone: see queued
--@inline queued(q, d, 1, pushed, redis.pcall('ZADD', d, deadline, member), timeout)
--@end

-- join puts member at the tail of the queue with a liveness deadline timeout ms from now when
-- fresh (the hold's first attempt: it cannot be queued already), or, for a later attempt,
-- renews the deadline of its entry (it keeps its place). A later attempt whose entry is dead,
-- or gone (passed at the head as dead, or granted what it waited for and lost it since), gets
-- false and is left out: the waiter starts over under a new hold id, so that no hold id is
-- ever queued twice and a late grant message of the old one grants nothing.
local function join(q, d, member, now, timeout, fresh)
  local deadline = string.format('%d', now + timeout)
  if not fresh then
    local s = redis.call('ZSCORE', d, member)
    if not s or tonumber(s) <= now then
      redis.call('ZREM', d, member) -- dead: its list entry is a ghost now
      return false
    end
    redis.call('ZADD', d, deadline, member)
    keep_queue(q, d, timeout)
    return true
  end
  --@inline join_fresh(q, d, member, deadline, timeout)
  return true
end

-- leave takes member out of the queue: out of d at once, its list entry dropped as a ghost
-- when it reaches the head (or at once when it is the head). It returns whether the member was
-- queued and live.
local function leave(q, d, member, now)
  local s = redis.call('ZSCORE', d, member)
  if not s then
    return false
  end
  redis.call('ZREM', d, member)
  if redis.call('LINDEX', q, 0) == member then
    redis.call('LPOP', q)
  end
  return tonumber(s) > now
end

-- hold_of returns the hold id that a queue member starts with.
local function hold_of(m)
  return string.sub(m, 1, string.find(m, ' ', 38, true) - 1)
end

-- tell notifies the Clients of the granted hold ids, one message per Client (the ids of its
-- waiters, separated by spaces), on the channels base .. ':c:' .. Client id, with the publish
-- command pub. The holds of Client from (the caller's, or nil) are not published: tell
-- returns them, for the caller to tell.
local function tell(holds, base, pub, from)
  local mine = {}
  local by, order = {}, {}
  for _, hold in ipairs(holds) do
    local client = string.sub(hold, 1, 36)
    if client == from then
      mine[#mine + 1] = hold
    elseif by[client] then
      by[client] = by[client] .. ' ' .. hold
    else
      by[client] = hold
      order[#order + 1] = client
    end
  end
  for _, client in ipairs(order) do
    redis.call(pub, base .. ':c:' .. client, by[client])
  end
  return mine
end

-- transfer moves the live head of the queue cq, cd (a condition's waiters) onto the tail of
-- the queue q, d, or all of cq's live waiters in order unless one, each with a liveness
-- deadline timeout ms from now, as AQS transfers a node; it returns how many moved.
local function transfer(cq, cd, q, d, now, timeout, one)
  local moved = 0
  while true do
    local m = pop_live_head(cq, cd, now)
    if not m then
      return moved
    end
    join(q, d, m, now, timeout, true)
    moved = moved + 1
    if one then
      return moved
    end
  end
end
