#!lua
-- name: throttle
-- summary: Admit one job with admit.lua's options unless its dedupe key is held
--   (docs/protocol.md "Dedupe windows"): the first admission of a key within the window
--   wins, whatever became of its job since (retention does not shorten the window). A new
--   job takes the key for window ms (SET PX): the key then names it. Refuses an id whose
--   row exists as admit.lua does. Every argument, the shape of KEYS and the version fence
--   are checked before the first write.
-- KEYS[1] job: emq:{q}:job:<id>, hash, the job's row
-- KEYS[2] pending: emq:{q}:pending, sorted set of ready jobs
-- KEYS[3] delayed: emq:{q}:delayed, sorted set, score = due time (server ms)
-- KEYS[4] lanes: emq:{q}:lanes, hash, lane -> start tag of its last waiting job
-- KEYS[5] meta: emq:{q}:meta, hash, protocol version and vtime
-- KEYS[6] wake: emq:{q}:wake, shard channel
-- KEYS[7] dedupe: emq:{q}:dd:<key>, string, the id of the job that holds the key, expiring
--   with the window
-- KEYS[8] expiring: emq:{q}:expiring, as admit.lua's (written only with expires_ms)
-- ARGV[1] id: the branded job id
-- ARGV[2] payload: the job's bytes
-- ARGV[3] lane: as admit.lua's
-- ARGV[4] delay_ms: as admit.lua's
-- ARGV[5] serial: as admit.lua's
-- ARGV[6] max_attempts: as admit.lua's
-- ARGV[7] priority: as admit.lua's
-- ARGV[8] timeout_ms: as admit.lua's
-- ARGV[9] token: as admit.lua's
-- ARGV[10] window_ms: how long the key refuses later admissions (1..2678400000)
-- ARGV[11] expires_ms: as admit.lua's ('' for no deadline; docs/decisions/0045-expiry.md)
-- RETURNS: array {verdict, holder}: {1, id} enqueued (by this call: a resend whose first
--   send landed too) | {0, holder} refused: the key is held by holder's job, or the id's
--   row exists (holder = id); nothing written
-- ERRORS: EMQKIND the id is not JOB-namespaced; EMQARG a malformed argument; EMQKEYS keys
--   not this id's queue; EMQVERSION another major version; nothing written
-- @include fence
-- @include shape
-- @include options
-- @include dedupe
-- @include deadline
if string.sub(ARGV[1] or '', 1, 3) ~= 'JOB' then
  return redis.error_reply('EMQKIND job id must be JOB-namespaced')
end
local bad = shape({'job:' .. ARGV[1], 'pending', 'delayed', 'lanes', 'meta', 'wake'}, 11, 6)
if bad or #KEYS ~= 8 or #ARGV ~= 11 or KEYS[8] ~= string.sub(KEYS[2], 1, -8) .. 'expiring' then
  return bad or redis.error_reply('EMQKEYS ' .. #KEYS .. ' keys and ' .. #ARGV .. ' args do not fit the contract')
end
local err, delay = admit_args()
if err then return err end
local derr, window = dedupe_args(KEYS[7], ARGV[10])
if derr then return derr end
local xerr, expires = deadline_arg(ARGV[11], delay)
if xerr then return xerr end
local refused, known = fence(KEYS[5])
if refused then return refused end
local id, tok = ARGV[1], ARGV[9]
local holder = redis.call('GET', KEYS[7])
if holder or redis.call('EXISTS', KEYS[1]) == 1 then -- fence: the window, then the id
  local mine = (holder or id) == id and tok ~= '' and redis.call('HGET', KEYS[1], 'tok') == tok
  return {mine and 1 or 0, holder or id} -- a resend of this call whose first send landed: 1
end
admit_row(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], id, delay, known)
if expires then set_deadline(KEYS[1], KEYS[8], id, expires) end
redis.call('SET', KEYS[7], id, 'PX', window)
return {1, id}
