#!lua flags=no-writes
-- name: info
-- summary: One consistent look at a queue for operators: whether it exists, its counts by
--   state, jobs finished and dead within the last window_ms, the next pending jobs (their
--   ids carry their admission time), leases past their deadline, and the live workers.
-- KEYS[1] pending: emq:{q}:pending
-- KEYS[2] active: emq:{q}:active
-- KEYS[3] delayed: emq:{q}:delayed
-- KEYS[4] done: emq:{q}:done
-- KEYS[5] dead: emq:{q}:dead
-- KEYS[6] meta: emq:{q}:meta
-- KEYS[7] workers: emq:{q}:workers
-- KEYS[8] about: emq:{q}:workers:about
-- KEYS[9] expired: emq:{q}:expired
-- ARGV[1] window_ms: the window of the recent counts
-- RETURNS: {exists, pending, active, delayed, done, dead, done_recent, dead_recent, now, overdue,
--   first_unlaned, first_laned, {name, deadline, about per live worker}, expired,
--   expired_recent}
-- ERRORS: EMQARG a malformed argument; EMQKEYS keys not one queue's; EMQVERSION another
--   major version
-- @include now
-- @include fence
-- @include shape
local bad = shape({'pending', 'active', 'delayed', 'done', 'dead', 'meta', 'workers',
                   'workers:about', 'expired'}, 1)
if bad then return bad end
local window = tonumber(ARGV[1])
if not window or window < 0 then
  return redis.error_reply('EMQARG window_ms must be >= 0')
end
local refused = fence(KEYS[6])
if refused then return refused end
local now = now_ms()
local since = '(' .. fmt(now - window)
local out = {redis.call('EXISTS', KEYS[6])}
for i = 1, 5 do out[#out + 1] = redis.call('ZCARD', KEYS[i]) end
out[#out + 1] = redis.call('ZCOUNT', KEYS[4], since, '+inf')
out[#out + 1] = redis.call('ZCOUNT', KEYS[5], since, '+inf')
out[#out + 1] = fmt(now)
out[#out + 1] = redis.call('ZCOUNT', KEYS[2], '-inf', '(' .. fmt(now))
out[#out + 1] = redis.call('ZRANGE', KEYS[1], 0, 0, 'BYSCORE', 'LIMIT', 0, 1)[1] or ''
out[#out + 1] = redis.call('ZRANGE', KEYS[1], '(0', '+inf', 'BYSCORE', 'LIMIT', 0, 1)[1] or ''
local flat = {}
local live = redis.call('ZRANGE', KEYS[7], fmt(now), '+inf', 'BYSCORE', 'WITHSCORES')
for i = 1, #live, 2 do
  flat[#flat + 1] = live[i]
  flat[#flat + 1] = live[i + 1]
  flat[#flat + 1] = redis.call('HGET', KEYS[8], live[i]) or ''
end
out[#out + 1] = flat
out[#out + 1] = redis.call('ZCARD', KEYS[9])
out[#out + 1] = redis.call('ZCOUNT', KEYS[9], since, '+inf')
return out
