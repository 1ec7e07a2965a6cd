#!lua flags=allow-oom
-- name: heartbeat
-- summary: Extend the lease of one attempt, only if that attempt still holds a live lease
--   (an expired lease is lost even before reap runs: another claim may follow at any time).
-- KEYS[1] active: emq:{q}:active
-- KEYS[2] job: emq:{q}:job:<id>
-- ARGV[1] id: the job id
-- ARGV[2] attempt: the fencing token the claim returned
-- ARGV[3] lease_ms: the new lease, from the server's now
-- RETURNS: the new deadline (server ms) | 0 the lease is lost (reaped, finished, or re-claimed)
-- ERRORS: EMQARG a malformed argument
-- @include now
local lease = tonumber(ARGV[3])
if not lease or lease <= 0 then
  return redis.error_reply('EMQARG lease_ms must be a positive number')
end
local row = redis.call('HMGET', KEYS[2], 'state', 'attempts')
local current = redis.call('ZSCORE', KEYS[1], ARGV[1])
local now = now_ms()
if row[1] ~= 'active' or row[2] ~= ARGV[2] or not current or tonumber(current) < now then
  return 0
end
local deadline = now + lease
redis.call('ZADD', KEYS[1], deadline, ARGV[1])
return deadline
