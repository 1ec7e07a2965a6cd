#!lua flags=allow-oom
-- name: reap
-- summary: Re-expose the candidate active jobs (peeked by the client, earliest deadline
--   first) whose lease has expired on the server clock: back to pending, or to the dead set
--   once the expiry makes max_attempts failures. The lost attempt's token stays stale: the
--   next claim increments attempts. A job asked to stop (cancel) ends 'cancelled' instead.
--   Ended jobs are told on the finished channel. Bounded by the number of candidates. A
--   requeued job keeps its deadline (expires_ms): it goes back on the expiring index.
-- KEYS[1] active: emq:{q}:active
-- KEYS[2] pending: emq:{q}:pending
-- KEYS[3] dead: emq:{q}:dead
-- KEYS[4] lanes: emq:{q}:lanes
-- KEYS[5] meta: emq:{q}:meta
-- KEYS[6] inflight: emq:{q}:inflight
-- KEYS[7] wake: emq:{q}:wake
-- KEYS[8] done: emq:{q}:done, where a cancelled job's row is kept
-- KEYS[9] finished: emq:{q}:finished, shard channel told the ids of jobs that ended
-- KEYS[10] expiring: emq:{q}:expiring, a requeued job with a deadline goes back on it
-- KEYS[11..] jobs: emq:{q}:job:<id> for each candidate, in ARGV[2..] order
-- ARGV[1] max_attempts: failure limit when the row names none, 1..10000
-- ARGV[2..] ids: the candidate ids
-- RETURNS: {requeued, dead, cancelled}
-- ERRORS: EMQARG a malformed argument; EMQKEYS job keys not the ids' or not this queue's;
--   EMQVERSION another major version; nothing written
-- @include now
-- @include age
-- @include pend
-- @include release
-- @include ended
-- @include flows
-- @include fence
-- @include shape
local bad = shape({'active', 'pending', 'dead', 'lanes', 'meta', 'inflight', 'wake', 'done',
                   'finished', 'expiring'}, 1, 10, 1)
if bad then return bad end
local limit = tonumber(ARGV[1])
if not limit or limit < 1 or limit > 10000 or limit ~= math.floor(limit) then
  return redis.error_reply('EMQARG max_attempts must be an integer in 1..10000')
end
local refused = fence(KEYS[5])
if refused then return refused end
local now = now_ms()
local requeued, dead, cancelled, told = 0, 0, 0, {}
for i = 2, #ARGV do
  local id, job = ARGV[i], KEYS[i + 9]
  local deadline = redis.call('ZSCORE', KEYS[1], id)
  if deadline and tonumber(deadline) <= now then -- threshold: the lease expired
    redis.call('ZREM', KEYS[1], id)
    local row = redis.call('HMGET', job, 'state', 'failures', 'max', 'lane', 'cancel', 'parent', 'exp')
    if row[1] and row[5] then -- fence: a cancel was asked: cancelled, not run again
      release(KEYS[6], row[4], id)
      ended(job, KEYS[8], id, now)
      cancelled, told[#told + 1] = cancelled + 1, id
      if row[6] then flow_told(KEYS[9], id, row[6], 'cancelled') end
    elseif row[1] then
      local failures = (tonumber(row[2]) or 0) + 1
      if failures >= (tonumber(row[3]) or limit) then -- threshold: the failure limit
        redis.call('HSET', job, 'state', 'dead', 'failures', failures, 'error', 'lease expired')
        redis.call('ZADD', KEYS[3], now, id)
        release(KEYS[6], row[4], id)
        dead, told[#told + 1] = dead + 1, id
        if row[6] then flow_told(KEYS[9], id, row[6], 'dead') end
      else
        redis.call('HSET', job, 'state', 'pending', 'failures', failures, 'error', 'lease expired')
        pend(KEYS[2], KEYS[4], KEYS[5], KEYS[7], id, row[4],
             row[4] and redis.call('HGET', KEYS[6], row[4]) == id, job)
        if row[7] then redis.call('ZADD', KEYS[10], row[7], id) end -- its deadline holds
        requeued = requeued + 1
      end
    end
  end
end
if #told > 0 then redis.call('SPUBLISH', KEYS[9], table.concat(told, ' ')) end
return {requeued, dead, cancelled}
