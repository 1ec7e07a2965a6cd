#!lua
-- name: debounce
-- summary: Admit one job with admit.lua's options, debounced on its dedupe key
--   (docs/protocol.md "Dedupe windows"): while the key's holder still waits (pending or
--   delayed), this admission replaces the holder's payload, moves its due time to now +
--   delay_ms and holds the key window ms more; nothing new is admitted. Otherwise (no
--   holder, or it runs or ended) the job is admitted and takes the key. The job must be
--   on a serial lane, so a new job waits for a running holder on the same lane
--   (keep-last-if-active). The caller names the holder it expects (peek-then-act,
--   docs/decisions/0002): another holder answers 3 and changes nothing. Every argument,
--   the shape of KEYS and the version fence are checked before the first write.
-- KEYS[1] job: emq:{q}:job:<id>, hash, the job's row
-- KEYS[2] pending: emq:{q}:pending, sorted set of ready jobs
-- KEYS[3] delayed: emq:{q}:delayed, sorted set, score = due time (server ms)
-- KEYS[4] lanes: emq:{q}:lanes, hash, lane -> start tag of its last waiting job
-- KEYS[5] meta: emq:{q}:meta, hash, protocol version and vtime
-- KEYS[6] wake: emq:{q}:wake, shard channel
-- KEYS[7] dedupe: emq:{q}:dd:<key>, string, the id of the job that holds the key, expiring
--   with the window
-- KEYS[8] inflight: emq:{q}:inflight, hash, serial lane -> the job holding it
-- KEYS[9] holder: emq:{q}:job:<ARGV[11]>, the expected holder's row (KEYS[1] when none)
-- KEYS[10] expiring: emq:{q}:expiring, as admit.lua's (written only with expires_ms for a
--   new job; a replaced holder keeps its own deadline)
-- ARGV[1] id: the branded job id
-- ARGV[2] payload: the job's bytes
-- ARGV[3] lane: as admit.lua's (the lane given, serial 1)
-- ARGV[4] delay_ms: as admit.lua's
-- ARGV[5] serial: as admit.lua's
-- ARGV[6] max_attempts: as admit.lua's
-- ARGV[7] priority: as admit.lua's
-- ARGV[8] timeout_ms: as admit.lua's
-- ARGV[9] token: as admit.lua's
-- ARGV[10] window_ms: how long the key stays held after this admission (1..2678400000)
-- ARGV[11] holder: the id the caller expects to hold the key, '' for none
-- ARGV[12] expires_ms: as admit.lua's ('' for no deadline; docs/decisions/0045-expiry.md)
-- RETURNS: array {verdict, holder}: {1, id} enqueued (by this call) | {2, holder} the
--   holder's payload replaced and its due time moved | {0, id} the id's row exists,
--   nothing written | {3, holder} another holder than ARGV[11]: nothing written, ask again
-- ERRORS: EMQKIND the id is not JOB-namespaced; EMQARG a malformed argument, no lane or
--   not serial; EMQKEYS keys not this id's queue; EMQVERSION another major version;
--   nothing written
-- @include fence
-- @include shape
-- @include options
-- @include dedupe
-- @include deadline
if string.sub(ARGV[1] or '', 1, 3) ~= 'JOB' then
  return redis.error_reply('EMQKIND job id must be JOB-namespaced')
end
local bad = shape({'job:' .. ARGV[1], 'pending', 'delayed', 'lanes', 'meta', 'wake'}, 12, 6)
if bad or #KEYS ~= 10 or #ARGV ~= 12 or KEYS[8] ~= string.sub(KEYS[2], 1, -8) .. 'inflight'
    or KEYS[10] ~= string.sub(KEYS[2], 1, -8) .. 'expiring' then
  return bad or redis.error_reply('EMQKEYS ' .. #KEYS .. ' keys and ' .. #ARGV .. ' args do not fit the contract')
end
local id, tok, guess = ARGV[1], ARGV[9], ARGV[11]
if KEYS[9] ~= string.sub(KEYS[1], 1, -#id - 1) .. (guess ~= '' and guess or id) then
  return redis.error_reply('EMQKEYS KEYS[9] is not the job of ARGV[11]')
end
local err, delay = admit_args()
if err then return err end
if ARGV[3] == '' or ARGV[5] ~= '1' then -- a running holder must hold the new job back
  return redis.error_reply('EMQARG a debounced job must be on a serial lane')
end
local derr, window = dedupe_args(KEYS[7], ARGV[10])
if derr then return derr end
local xerr, expires = deadline_arg(ARGV[12], delay)
if xerr then return xerr end
local refused, known = fence(KEYS[5])
if refused then return refused end
local holder = redis.call('GET', KEYS[7])
if holder == id and tok ~= '' and redis.call('HGET', KEYS[1], 'tok') == tok then
  return {1, id} -- a resend of this call, whose first send admitted the job
end
if holder and holder ~= guess then return {3, holder} end -- fence: the holder the caller saw
local row = holder and redis.call('HMGET', KEYS[9], 'state', 'lane') or {}
if row[1] == 'pending' or row[1] == 'delayed' then -- fence: only a waiting holder is replaced
  redis.call('HSET', KEYS[9], 'payload', ARGV[2])
  if delay > 0 then
    redis.call('ZREM', KEYS[2], holder)
    redis.call('HSET', KEYS[9], 'state', 'delayed')
    redis.call('ZADD', KEYS[3], now_ms() + delay, holder)
  elseif row[1] == 'delayed' then
    redis.call('ZREM', KEYS[3], holder)
    redis.call('HSET', KEYS[9], 'state', 'pending') -- a holder that holds its lane goes first
    pend(KEYS[2], KEYS[4], KEYS[5], KEYS[6], holder, row[2], redis.call('HGET', KEYS[8], row[2] or '') == holder, KEYS[9])
  end
  redis.call('SET', KEYS[7], holder, 'PX', window)
  return {2, holder}
end
if redis.call('EXISTS', KEYS[1]) == 1 then return {0, id} end
admit_row(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], id, delay, known)
if expires then set_deadline(KEYS[1], KEYS[10], id, expires) end
redis.call('SET', KEYS[7], id, 'PX', window)
return {1, id}
