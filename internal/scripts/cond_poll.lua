-- cond_poll: a later attempt of a Condition's waiter: is it still waiting for a Signal?
--
-- KEYS[1]  the condition's list cq, KEYS[2] its deadline zset cd (see cond_wait.lua)
-- ARGV[1]  the waiter's member "<hold id> <lease ms>"
-- ARGV[2]  waiter timeout in ms
--
-- Replies: {3, ms} still waiting (its deadline renewed, as any attempt renews it): look again
-- within ms without a message; {0} not on the condition any longer: a Signal moved it onto
-- the lock's queue (or it was dropped as dead), and its attempts are the lock's from now on.
--@include _queue
local timeout = tonumber(ARGV[2])
if join(KEYS[1], KEYS[2], ARGV[1], server_ms(), timeout, false) then
  return {3, math.max(1, math.floor(timeout / 3))}
end
return {0}
