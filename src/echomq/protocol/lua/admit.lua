#!lua
-- name: admit
-- summary: Admit one job with options: onto a lane, delayed until later, with its own
--   attempt limit and priority. Same kind check and duplicate refusal as enqueue; every argument, the
--   shape of KEYS and the version fence are checked before the first write.
-- KEYS[1] job: emq:{q}:job:<id>, hash, the job's row
-- KEYS[2] pending: emq:{q}:pending, sorted set of ready jobs
-- KEYS[3] delayed: emq:{q}:delayed, sorted set, score = due time (server ms)
-- KEYS[4] lanes: emq:{q}:lanes, hash, lane -> start tag of its last waiting job
-- KEYS[5] meta: emq:{q}:meta, hash, protocol version and vtime
-- KEYS[6] wake: emq:{q}:wake, shard channel
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
-- RETURNS: 1 enqueued (by this call: a resend whose first send landed too) | 0 duplicate
--   (the existing row untouched)
-- ERRORS: EMQKIND the id is not JOB-namespaced; EMQARG a malformed argument; EMQKEYS keys
--   not this id's queue; EMQVERSION another major version; nothing written
-- @include fence
-- @include shape
-- @include options
if string.sub(ARGV[1] or '', 1, 3) ~= 'JOB' then
  return redis.error_reply('EMQKIND job id must be JOB-namespaced')
end
local bad = shape({'job:' .. ARGV[1], 'pending', 'delayed', 'lanes', 'meta', 'wake'}, 9)
if bad then return bad end
local err, delay = admit_args()
if err then return err end
local refused, known = fence(KEYS[5])
if refused then return refused end
if redis.call('EXISTS', KEYS[1]) == 1 then -- a duplicate, or this call's own resend
  local tok = ARGV[9]
  return (tok ~= '' and redis.call('HGET', KEYS[1], 'tok') == tok) and 1 or 0
end
admit_row(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], ARGV[1], delay, known)
return 1
