-- _lock_value: the exclusive lock's value, a fragment included by the lock_* and fair_* scripts.
--
-- The lock key of the reentrant lock, the fair lock (and the write side of the read-write
-- lock) is a string, present only while the lock is held:
--
--   "<hold> [n<count>] [t<token>] [w]"
--
-- <hold> is the hold id (a Client id and a sequence number, fresh for every hold), n the hold
-- count when above 1, t the fencing token once one was assigned, w a mark that a release must
-- notify (a waiter of the reentrant lock) or hand off (the fair lock's queue). A fresh hold is
-- just "<hold>", which the reentrant lock takes with a plain SET NX PX and every lock frees
-- with one comparison: the uncontended cycle costs what the minimal lock costs.

-- parse_value splits a value into its hold id and the rest, or raises WRONGTYPE for a value
-- aqs did not write.
local function parse_value(v)
  local hold, rest = string.match(v, '^(%x+%-%x+%-%x+%-%x+%-%x+:%d+)(.*)$')
  if not hold then
    error({err = 'WRONGTYPE the lock key holds a value aqs did not write'})
  end
  return hold, rest
end

-- hold_count is the hold count recorded in the rest of a value.
local function hold_count(rest)
  return tonumber(string.match(rest, ' n(%d+)')) or 1
end

-- with_count returns the value of hold with its count set to n.
local function with_count(hold, rest, n)
  rest = string.gsub(rest, ' n%d+', '')
  if n > 1 then
    return hold .. ' n' .. n .. rest
  end
  return hold .. rest
end
