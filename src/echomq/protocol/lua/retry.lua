#!lua flags=allow-oom
-- name: retry
-- summary: End one attempt without success, fenced by (id, attempt) and its live lease, and
--   schedule the job again after delay_ms (to pending at once when 0). mode 'fail' counts a
--   failure and keeps the error; at max_attempts failures the job goes to the dead set
--   instead; mode 'dead' counts a failure and ends the job dead now, whatever the limit (a
--   typed task gave up: give_up_on). mode 'defer' (a rate budget said "later") counts
--   nothing. The attempt counter only ever grows: it is the fencing token. A serial lane stays held until the job ends.
--   A job asked to stop (cancel) ends 'cancelled' in either mode; an ended job is told.
--   A job scheduled again keeps its deadline (expires_ms): the wait counts against it.
-- KEYS[1] active: emq:{q}:active
-- KEYS[2] job: emq:{q}:job:<id>
-- KEYS[3] delayed: emq:{q}:delayed
-- KEYS[4] dead: emq:{q}:dead, sorted set, score = time of death (server ms)
-- KEYS[5] inflight: emq:{q}:inflight
-- KEYS[6] pending: emq:{q}:pending
-- KEYS[7] lanes: emq:{q}:lanes
-- KEYS[8] meta: emq:{q}:meta
-- KEYS[9] wake: emq:{q}:wake
-- KEYS[10] done: emq:{q}:done, where a cancelled job's row is kept
-- KEYS[11] finished: emq:{q}:finished, shard channel told the ids of jobs that ended
-- KEYS[12] expiring: emq:{q}:expiring, a job scheduled again with a deadline goes back on it
-- ARGV[1] id: the job id
-- ARGV[2] attempt: the fencing token
-- ARGV[3] delay_ms: wait before the job is pending again, 0..31622400000
-- ARGV[4] max_attempts: failure limit when the row names none, 1..10000
-- ARGV[5] error: text kept in the row as 'error' (modes fail, dead), at most 65536 bytes; past
--   maxmemory only its first 1024 bytes are kept (the failure still counts)
-- ARGV[6] mode: 'fail', 'dead' or 'defer'
-- ARGV[7] token: this call's token (at most 32 bytes), kept with the verdict in the row as
--   'fin' (include/earned.lua): a resend of this call answers what its first send earned
-- RETURNS: 1 scheduled again | 2 dead | 3 cancelled | 0 stale (nothing changed); a resend:
--   its first send's verdict
-- ERRORS: EMQARG a malformed argument; EMQKEYS keys not this id's queue; EMQVERSION another
--   major version; nothing written
-- @include now
-- @include bytes
-- @include age
-- @include pend
-- @include release
-- @include ended
-- @include flows
-- @include fence
-- @include shape
-- @include earned
local bad = shape({'active', 'job:' .. (ARGV[1] or ''), 'delayed', 'dead', 'inflight', 'pending',
                   'lanes', 'meta', 'wake', 'done', 'finished', 'expiring'}, 7)
if bad then return bad end
local delay = tonumber(ARGV[3])
local limit = tonumber(ARGV[4])
if not delay or delay < 0 or delay > 31622400000 or delay ~= math.floor(delay) then
  return redis.error_reply('EMQARG delay_ms must be an integer in 0..31622400000')
end
if not limit or limit < 1 or limit > 10000 or limit ~= math.floor(limit) then
  return redis.error_reply('EMQARG max_attempts must be an integer in 1..10000')
end
if ARGV[6] ~= 'fail' and ARGV[6] ~= 'dead' and ARGV[6] ~= 'defer' then
  return redis.error_reply('EMQARG mode must be fail, dead or defer')
end
local tok = ARGV[7]
if #tok > 32 then return redis.error_reply('EMQARG token must be at most 32 bytes') end
local err = ARGV[5] or ''
local big = too_long('error', #err, MAX_ERROR)
if big then return big end
if ARGV[6] ~= 'defer' and full(#err) then err = string.sub(err, 1, ROOM) end -- past the limit: 1 KiB
local refused = fence(KEYS[8])
if refused then return refused end
local row = redis.call('HMGET', KEYS[2], 'state', 'attempts', 'max', 'failures', 'lane', 'cancel', 'parent',
                         'exp')
local current = redis.call('ZSCORE', KEYS[1], ARGV[1])
local now = now_ms()
local e = (row[1] ~= 'active' or row[2] ~= ARGV[2]) and earned(KEYS[2], tok) or 0
if e > 0 then return e end -- a resend of this call, whose first send finished the attempt
if row[1] ~= 'active' then return 0 end -- not running
if row[2] ~= ARGV[2] then return 0 end -- fence: another attempt holds it
if not current then return 0 end -- no lease
if tonumber(current) < now then return 0 end -- fence: the lease deadline passed
redis.call('ZREM', KEYS[1], ARGV[1])
if row[6] then -- fence: a cancel was asked: the job ends cancelled, never runs again
  ended(KEYS[2], KEYS[10], ARGV[1], now) redis.call('HSET', KEYS[2], 'fin', '3' .. tok)
  release(KEYS[5], row[5], ARGV[1]) redis.call('SPUBLISH', KEYS[11], ARGV[1])
  if row[7] then flow_told(KEYS[11], ARGV[1], row[7], 'cancelled') end
  return 3
end
if ARGV[6] ~= 'defer' then
  local failures = (tonumber(row[4]) or 0) + 1
  redis.call('HSET', KEYS[2], 'failures', failures, 'error', err)
  if ARGV[6] == 'dead' then failures = math.huge end -- given up: dead now
  if failures >= (tonumber(row[3]) or limit) then -- threshold: the failure limit
    redis.call('HSET', KEYS[2], 'state', 'dead', 'fin', '2' .. tok)
    redis.call('ZADD', KEYS[4], now, ARGV[1])
    release(KEYS[5], row[5], ARGV[1])
    redis.call('SPUBLISH', KEYS[11], ARGV[1])
    if row[7] then flow_told(KEYS[11], ARGV[1], row[7], 'dead') end
    return 2
  end
end
if row[8] then redis.call('ZADD', KEYS[12], row[8], ARGV[1]) end -- its deadline holds (0045)
if delay == 0 then
  redis.call('HSET', KEYS[2], 'state', 'pending', 'fin', '1' .. tok)
  pend(KEYS[6], KEYS[7], KEYS[8], KEYS[9], ARGV[1], row[5],
       row[5] and redis.call('HGET', KEYS[5], row[5]) == ARGV[1], KEYS[2])
else
  redis.call('HSET', KEYS[2], 'state', 'delayed', 'fin', '1' .. tok)
  redis.call('ZADD', KEYS[3], now + delay, ARGV[1])
end
return 1
