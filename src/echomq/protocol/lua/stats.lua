#!lua flags=no-writes
-- name: stats
-- summary: The number of jobs in each state, read in one step.
-- KEYS[1] pending: emq:{q}:pending
-- KEYS[2] active: emq:{q}:active
-- KEYS[3] delayed: emq:{q}:delayed
-- KEYS[4] done: emq:{q}:done
-- KEYS[5] dead: emq:{q}:dead
-- KEYS[6] meta: emq:{q}:meta
-- KEYS[7] expired: emq:{q}:expired
-- RETURNS: {pending, active, delayed, done, dead, expired}
-- ERRORS: EMQKEYS keys not one queue's; EMQVERSION another major version
-- @include fence
-- @include shape
local bad = shape({'pending', 'active', 'delayed', 'done', 'dead', 'meta', 'expired'}, 0)
if bad then return bad end
local refused = fence(KEYS[6])
if refused then return refused end
local out = {}
for i = 1, 5 do out[i] = redis.call('ZCARD', KEYS[i]) end
out[6] = redis.call('ZCARD', KEYS[7])
return out
