#!lua
-- name: admit
-- summary: Admit one job with options: onto a lane, delayed until later, with its own
--   attempt limit. Same kind check and duplicate refusal as enqueue; every argument is
--   checked before the first write.
-- KEYS[1] job: emq:{q}:job:<id>, hash, the job's row
-- KEYS[2] pending: emq:{q}:pending, sorted set of ready jobs
-- KEYS[3] delayed: emq:{q}:delayed, sorted set, score = due time (server ms)
-- KEYS[4] lanes: emq:{q}:lanes, hash, lane -> start tag of its last waiting job
-- KEYS[5] meta: emq:{q}:meta, hash, protocol version and vtime
-- KEYS[6] wake: emq:{q}:wake, shard channel
-- ARGV[1] id: the branded job id
-- ARGV[2] payload: the job's bytes
-- ARGV[3] lane: lane name, '' for none
-- ARGV[4] delay_ms: 0 for now, else milliseconds from the server's now
-- ARGV[5] serial: '1' to hold the lane to one job in flight, else '0'
-- ARGV[6] max_attempts: the job's failure limit, '' for the consumer's default
-- RETURNS: 1 enqueued | 0 duplicate (the existing row untouched)
-- ERRORS: EMQKIND the id is not JOB-namespaced; EMQARG a malformed argument; nothing written
-- @include now
-- @include pend
if string.sub(ARGV[1], 1, 3) ~= 'JOB' then
  return redis.error_reply('EMQKIND job id must be JOB-namespaced')
end
local delay = tonumber(ARGV[4])
if not delay or delay < 0 or delay ~= math.floor(delay) then
  return redis.error_reply('EMQARG delay_ms must be a non-negative integer')
end
if ARGV[5] ~= '0' and ARGV[5] ~= '1' then
  return redis.error_reply('EMQARG serial must be 0 or 1')
end
if ARGV[6] ~= '' and not tonumber(ARGV[6]) then
  return redis.error_reply('EMQARG max_attempts must be an integer')
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'state', 'pending', 'attempts', '0', 'payload', ARGV[2])
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[1], 'lane', ARGV[3], 'serial', ARGV[5])
end
if ARGV[6] ~= '' then
  redis.call('HSET', KEYS[1], 'max', ARGV[6])
end
if delay > 0 then
  redis.call('HSET', KEYS[1], 'state', 'delayed')
  redis.call('ZADD', KEYS[3], now_ms() + delay, ARGV[1])
else
  pend(KEYS[2], KEYS[4], KEYS[5], KEYS[6], ARGV[1], ARGV[3], false)
end
return 1
