-- cond_leave: a Condition's waiter gives up while it waits for a Signal.
--
-- KEYS[1]  the condition's list cq, KEYS[2] its deadline zset cd (see cond_wait.lua)
-- ARGV[1]  the waiter's member "<hold id> <lease ms>"
--
-- Replies: 1 it left the condition; 0 it was not on it (a Signal moved it onto the lock's
-- queue, where the lock's give-up takes it out, or it was dropped as dead).
--@include _queue
if redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  leave(KEYS[1], KEYS[2], ARGV[1], server_ms())
  return 1
end
return 0
