#!lua flags=allow-oom
-- name: heartbeat
-- summary: Extend the lease of one attempt, only if that attempt still holds a live lease
--   (an expired lease is lost even before reap runs: another claim may follow at any time).
--   A job asked to stop (cancel) is still extended, and the reply says so by its sign: the
--   handler learns it at its next beat and ends the attempt (it ends 'cancelled').
-- KEYS[1] active: emq:{q}:active
-- KEYS[2] job: emq:{q}:job:<id>
-- KEYS[3] meta: emq:{q}:meta
-- ARGV[1] id: the job id
-- ARGV[2] attempt: the fencing token the claim returned
-- ARGV[3] lease_ms: the new lease from the server's now, 1..86400000
-- RETURNS: the new deadline (server ms) | minus the new deadline: extended, and a cancel was
--   asked for | 0 the lease is lost (reaped, finished, or re-claimed)
-- ERRORS: EMQARG a malformed argument; EMQKEYS keys not this id's queue; EMQVERSION another
--   major version; nothing written
-- @include now
-- @include fence
-- @include shape
local bad = shape({'active', 'job:' .. (ARGV[1] or ''), 'meta'}, 3)
if bad then return bad end
local lease = tonumber(ARGV[3])
if not lease or lease < 1 or lease > 86400000 or lease ~= math.floor(lease) then
  return redis.error_reply('EMQARG lease_ms must be an integer in 1..86400000')
end
local refused = fence(KEYS[3])
if refused then return refused end
local row = redis.call('HMGET', KEYS[2], 'state', 'attempts', 'cancel')
local current = redis.call('ZSCORE', KEYS[1], ARGV[1])
local now = now_ms()
if row[1] ~= 'active' then return 0 end -- not running
if row[2] ~= ARGV[2] then return 0 end -- fence: another attempt holds it
if not current then return 0 end -- no lease
if tonumber(current) < now then return 0 end -- fence: the lease deadline passed
local deadline = now + lease
redis.call('ZADD', KEYS[1], deadline, ARGV[1])
if row[3] then return -deadline end -- asked to stop: the sign tells
return deadline
