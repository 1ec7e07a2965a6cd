#!lua
-- name: enqueue
-- summary: Admit one job (docs/protocol.md, "Admission"): the row and the pending entry
--   land together or not at all. Refuses a non-JOB id before any write and a duplicate id
--   without writing. Every check (kind, the shape of KEYS, the version fence) precedes the
--   first write. When pending is empty and a consumer is parked, the job is leased to it in
--   this same step instead (hand-off, docs/decisions/0018): the row is written active with
--   attempt 1, the lease goes on active, and the wake message carries the lease. The
--   verdict is the same. The claim gate holds a hand-off as it holds a claim
--   (docs/decisions/0022): none while the queue is paused or its rate limit is reached,
--   and a job handed off counts against the rate limit.
-- KEYS[1] job: emq:{q}:job:<id>, hash, the job's row
-- KEYS[2] pending: emq:{q}:pending, sorted set, member id, score = meta's vtime (a plain job's tag)
-- KEYS[3] wake: emq:{q}:wake, shard channel, told the id when pending stops being empty
-- KEYS[4] meta: emq:{q}:meta, hash, the protocol version (recorded by the first admission); its vtime is a plain job's score (include/pend.lua)
-- KEYS[5] parked: emq:{q}:parked, sorted set of parked consumers (park.lua)
-- KEYS[6] active: emq:{q}:active, sorted set, score = lease deadline (server ms)
-- KEYS[7] rate: emq:{q}:rate, list, the queue's last lease times (the claim gate's log)
-- ARGV[1] id: the branded job id
-- ARGV[2] payload: the job's bytes
-- ARGV[3] token: this call's token (at most 32 bytes, '' for none), kept in the row as 'tok':
--   a resend of this call whose first send admitted the job answers 1, not 0
-- RETURNS: 1 enqueued (by this call: a resend whose first send landed too) | 0 duplicate
--   (the existing row untouched)
-- ERRORS: EMQKIND the id is not JOB-namespaced; EMQARG a token over 32 bytes; EMQKEYS keys
--   not this id's queue; EMQVERSION another major version; nothing written
-- @include now
-- @include fence
-- @include shape
-- @include gate
-- @include handoff
if string.sub(ARGV[1] or '', 1, 3) ~= 'JOB' then
  return redis.error_reply('EMQKIND job id must be JOB-namespaced')
end
local bad = shape({'job:' .. ARGV[1], 'pending', 'wake', 'meta', 'parked', 'active', 'rate'}, 3)
if bad then return bad end
local tok = ARGV[3]
if #tok > 32 then return redis.error_reply('EMQARG token must be at most 32 bytes') end
local refused, known, meta = fence(KEYS[4], 'vtime')
if refused then return refused end
if redis.call('EXISTS', KEYS[1]) == 1 then -- a duplicate, or this call's own resend
  return (tok ~= '' and redis.call('HGET', KEYS[1], 'tok') == tok) and 1 or 0
end
if not known then redis.call('HSET', KEYS[4], 'protocol', PROTOCOL, 'plain', '1', 'bare', '1') end -- a new queue: plain, bare
local empty = redis.call('ZCARD', KEYS[2]) == 0
if empty and handoff(KEYS[5], KEYS[6], KEYS[1], KEYS[3], ARGV[1], ARGV[2], KEYS[4], KEYS[7], tok) then
  return 1
end
redis.call('HSET', KEYS[1], 'state', 'pending', 'attempts', '0', 'payload', ARGV[2], 'tok', tok)
redis.call('ZADD', KEYS[2], meta[2] or '0', ARGV[1]) -- threshold: a plain job's tag is vtime
if empty then
  redis.call('SPUBLISH', KEYS[3], ARGV[1]) -- the id: a claim candidate for the woken
end
return 1
