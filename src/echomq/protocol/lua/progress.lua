#!lua
-- name: progress
-- summary: Record a running attempt's progress report, fenced like complete: only the attempt
--   holding a live lease (its token, its deadline not passed on the server clock) writes; a
--   stale attempt's report is refused and changes nothing. The row keeps the last report as
--   'progress' and its server time as 'progress_at'; both stay with the finished row. The
--   reply also tells the attempt whether a cancel was asked for. Without flags (deny-oom): a
--   report adds bytes, so a server at its memory limit refuses it (the heartbeat still runs).
-- KEYS[1] active: emq:{q}:active
-- KEYS[2] job: emq:{q}:job:<id>
-- KEYS[3] meta: emq:{q}:meta
-- ARGV[1] id: the job id
-- ARGV[2] attempt: the fencing token the claim returned
-- ARGV[3] progress: the report, bytes, at most 65536
-- RETURNS: 1 recorded | 2 recorded, and a cancel was asked for (stop) | 0 stale (nothing
--   written)
-- ERRORS: EMQARG a report over 65536 bytes; EMQKEYS keys not this id's queue; EMQVERSION
--   another major version; nothing written
-- @include now
-- @include bytes
-- @include fence
-- @include shape
local bad = shape({'active', 'job:' .. (ARGV[1] or ''), 'meta'}, 3)
if bad then return bad end
local big = too_long('progress', #ARGV[3], MAX_PROGRESS)
if big then return big end
local refused = fence(KEYS[3])
if refused then return refused end
local row = redis.call('HMGET', KEYS[2], 'state', 'attempts', 'cancel')
local deadline = redis.call('ZSCORE', KEYS[1], ARGV[1])
local now = now_ms()
if row[1] ~= 'active' then return 0 end -- not running
if row[2] ~= ARGV[2] then return 0 end -- fence: another attempt holds it
if not deadline then return 0 end -- no lease
if tonumber(deadline) < now then return 0 end -- fence: the lease deadline passed
redis.call('HSET', KEYS[2], 'progress', ARGV[3], 'progress_at', fmt(now))
return row[3] and 2 or 1
