#!lua
-- name: admit
-- summary: Admit one job with options: onto a lane, delayed until later, with its own
--   attempt limit and priority, with a deadline to start by (expires_ms: past it the job
--   ends 'expired' and never runs, docs/decisions/0045-expiry.md). Same kind check and duplicate refusal as enqueue; every argument, the
--   shape of KEYS and the version fence are checked before the first write.
-- KEYS[1] job: emq:{q}:job:<id>, hash, the job's row
-- KEYS[2] pending: emq:{q}:pending, sorted set of ready jobs
-- KEYS[3] delayed: emq:{q}:delayed, sorted set, score = due time (server ms)
-- KEYS[4] lanes: emq:{q}:lanes, hash, lane -> start tag of its last waiting job
-- KEYS[5] meta: emq:{q}:meta, hash, protocol version and vtime
-- KEYS[6] wake: emq:{q}:wake, shard channel
-- KEYS[7] expiring: emq:{q}:expiring, sorted set, score = deadline (server ms), of the
--   waiting jobs that have one (written only with expires_ms)
-- ARGV[1] id: the branded job id
-- ARGV[2] payload: the job's bytes
-- ARGV[3] lane: lane name, '' for none; at most 1024 bytes (256 characters)
-- ARGV[4] delay_ms: 0 for now, else milliseconds from the server's now (at most 366 days)
-- ARGV[5] serial: '1' to hold the lane to one job in flight, else '0'
-- ARGV[6] max_attempts: the job's failure limit (1..10000), '' for the consumer's default
-- ARGV[7] priority: 0..3, higher is claimed first (aging: see include/pend.lua)
-- ARGV[8] timeout_ms: the job's handler timeout (1..31622400000), '' for the consumer's
-- ARGV[9] token: this call's token (at most 32 bytes, '' for none), kept in the row as 'tok':
--   a resend of this call whose first send admitted the job answers 1, not 0
-- ARGV[10] expires_ms: '' for no deadline, else the job must start within this many
--   milliseconds of the server's now (1..31622400000, more than delay_ms); kept in the row
--   as 'exp', the deadline in server ms
-- RETURNS: 1 enqueued (by this call: a resend whose first send landed too) | 0 duplicate
--   (the existing row untouched)
-- ERRORS: EMQKIND the id is not JOB-namespaced; EMQARG a malformed argument; EMQKEYS keys
--   not this id's queue; EMQVERSION another major version; nothing written
-- @include fence
-- @include shape
-- @include options
-- @include deadline
if string.sub(ARGV[1] or '', 1, 3) ~= 'JOB' then
  return redis.error_reply('EMQKIND job id must be JOB-namespaced')
end
local bad = shape({'job:' .. ARGV[1], 'pending', 'delayed', 'lanes', 'meta', 'wake', 'expiring'}, 10)
if bad then return bad end
local err, delay = admit_args()
if err then return err end
local derr, expires = deadline_arg(ARGV[10], delay)
if derr then return derr end
local refused, known = fence(KEYS[5])
if refused then return refused end
if redis.call('EXISTS', KEYS[1]) == 1 then -- a duplicate, or this call's own resend
  local tok = ARGV[9]
  return (tok ~= '' and redis.call('HGET', KEYS[1], 'tok') == tok) and 1 or 0
end
admit_row(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], ARGV[1], delay, known)
if expires then set_deadline(KEYS[1], KEYS[7], ARGV[1], expires) end
return 1
