#!lua flags=no-writes
-- name: row
-- summary: One job's row, behind the version fence.
-- KEYS[1] job: emq:{q}:job:<id>
-- KEYS[2] meta: emq:{q}:meta
-- ARGV[1] id: the job id
-- RETURNS: the row as a flat field/value array (empty when there is no such job)
-- ERRORS: EMQKEYS keys not this id's queue; EMQVERSION another major version
-- @include fence
-- @include shape
local bad = shape({'job:' .. (ARGV[1] or ''), 'meta'}, 1)
if bad then return bad end
local refused = fence(KEYS[2])
if refused then return refused end
return redis.call('HGETALL', KEYS[1])
