#!lua flags=no-writes
-- name: stats
-- summary: The number of jobs in each state, read in one step.
-- KEYS[1] pending: emq:{q}:pending
-- KEYS[2] active: emq:{q}:active
-- KEYS[3] delayed: emq:{q}:delayed
-- KEYS[4] done: emq:{q}:done
-- KEYS[5] dead: emq:{q}:dead
-- RETURNS: {pending, active, delayed, done, dead}
-- ERRORS: none
local out = {}
for i = 1, 5 do out[i] = redis.call('ZCARD', KEYS[i]) end
return out
