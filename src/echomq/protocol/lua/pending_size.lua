#!lua flags=no-writes
-- name: pending_size
-- summary: The number of jobs ready to be claimed.
-- KEYS[1] pending: emq:{q}:pending
-- KEYS[2] meta: emq:{q}:meta
-- RETURNS: the size of the pending set
-- ERRORS: EMQKEYS keys not one queue's; EMQVERSION another major version
-- @include fence
-- @include shape
local bad = shape({'pending', 'meta'}, 0)
if bad then return bad end
local refused = fence(KEYS[2])
if refused then return refused end
return redis.call('ZCARD', KEYS[1])
