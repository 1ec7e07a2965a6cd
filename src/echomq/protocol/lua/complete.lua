#!lua flags=allow-oom
-- name: complete
-- summary: Finish one attempt, fenced by (id, attempt) and by its lease: an attempt whose
--   lease has expired on the server clock can no longer finish. The lease is cleared in the
--   same step. The row is kept for keep_ms in the done set (so the id still refuses duplicates),
--   or deleted at once when keep_ms is 0. A kept row drops its payload and keeps the result
--   (allow-oom; docs/decisions/0010-memory-limit.md). If a cancel was asked for while the
--   attempt ran, the job ends 'cancelled' instead (kept, without the result): never done.
--   The finished channel is told the id.
-- KEYS[1] active: emq:{q}:active
-- KEYS[2] job: emq:{q}:job:<id>
-- KEYS[3] done: emq:{q}:done, sorted set, score = finish time (server ms)
-- KEYS[4] inflight: emq:{q}:inflight
-- KEYS[5] meta: emq:{q}:meta, hash; its 'plain' and 'bare' say which row fields the finish reads (decision 0050)
-- KEYS[6] finished: emq:{q}:finished, shard channel told the ids of jobs that ended
-- ARGV[1] id: the job id
-- ARGV[2] attempt: the fencing token
-- ARGV[3] keep_ms: retention of the finished row, 0..31622400000; 0 deletes it now
-- ARGV[4] result: bytes to keep in the row as 'result' ('' for none), at most 524288 bytes;
--   past maxmemory a result over 1024 bytes is refused (OOM), nothing written
-- ARGV[5] token: this call's token (at most 32 bytes), kept with the verdict in the row as
--   'fin' (include/earned.lua): a resend of this call answers what its first send earned
-- RETURNS: 1 completed | 2 cancelled (a cancel was asked for) | 0 stale (the attempt no
--   longer holds a live lease; nothing changed); a resend: its first send's verdict
-- ERRORS: EMQARG a malformed argument; EMQKEYS keys not this id's queue; EMQVERSION another
--   major version; OOM a result over 1024 bytes past maxmemory; nothing written
-- @include now
-- @include bytes
-- @include release
-- @include ended
-- @include flows
-- @include fence
-- @include shape
-- @include earned
local bad = shape({'active', 'job:' .. (ARGV[1] or ''), 'done', 'inflight', 'meta', 'finished'}, 5)
if bad then return bad end
local tok = ARGV[5]
local keep = tonumber(ARGV[3])
if not keep or keep < 0 or keep > 31622400000 or keep ~= math.floor(keep) then
  return redis.error_reply('EMQARG keep_ms must be an integer in 0..31622400000')
end
if #tok > 32 then return redis.error_reply('EMQARG token must be at most 32 bytes') end
local big = too_long('result', #ARGV[4], MAX_RESULT) or (keep > 0 and full(#ARGV[4]))
if big then return big end
local refused, _, m = fence(KEYS[5], 'plain', 'bare')
if refused then return refused end
-- What meta says no row of the queue has (decision 0050): 'bare', no parent and no cancel
-- request; 'plain' too, no lane. A plain job's row is read for its state and attempt only.
local bare = m[3] == '1' -- fence: no row has a parent or a cancel request
local lean = bare and m[2] == '1' -- fence: nor a lane
local row = lean and redis.call('HMGET', KEYS[2], 'state', 'attempts')
  or bare and redis.call('HMGET', KEYS[2], 'state', 'attempts', 'lane')
  or redis.call('HMGET', KEYS[2], 'state', 'attempts', 'lane', 'cancel', 'parent')
local deadline = redis.call('ZSCORE', KEYS[1], ARGV[1])
local now = now_ms()
local e = (row[1] ~= 'active' or row[2] ~= ARGV[2]) and earned(KEYS[2], tok) or 0
if e > 0 then return e end -- a resend of this call, whose first send finished the attempt
if row[1] ~= 'active' then return 0 end -- not running
if row[2] ~= ARGV[2] then return 0 end -- fence: another attempt holds it
if not deadline then return 0 end -- no lease
if tonumber(deadline) < now then return 0 end -- fence: the lease deadline passed
redis.call('ZREM', KEYS[1], ARGV[1])
release(KEYS[4], row[3], ARGV[1])
redis.call('SPUBLISH', KEYS[6], ARGV[1])
if row[4] then redis.call('HSET', KEYS[2], 'fin', '2' .. tok) end -- the verdict, for a resend
if row[5] then flow_told(KEYS[6], ARGV[1], row[5], row[4] and 'cancelled' or 'done') end
if row[4] then ended(KEYS[2], KEYS[3], ARGV[1], now) return 2 end -- fence: a cancel was asked
if keep == 0 then
  redis.call('DEL', KEYS[2])
else
  redis.call('HDEL', KEYS[2], 'payload')
  if ARGV[4] == '' then
    redis.call('HSET', KEYS[2], 'state', 'done', 'fin', '1' .. tok)
  else
    redis.call('HSET', KEYS[2], 'state', 'done', 'fin', '1' .. tok, 'result', ARGV[4])
  end
  redis.call('ZADD', KEYS[3], now, ARGV[1])
end
return 1
