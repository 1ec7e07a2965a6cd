#!lua flags=allow-oom
-- name: requeue
-- summary: Put the candidate dead jobs back on pending with a fresh failure budget. The
--   attempt counter is kept (it is the fencing token and only grows), and so is a job's
--   deadline (expires_ms, docs/decisions/0045-expiry.md): past it, the job expires unrun.
-- KEYS[1] dead: emq:{q}:dead
-- KEYS[2] pending: emq:{q}:pending
-- KEYS[3] lanes: emq:{q}:lanes
-- KEYS[4] meta: emq:{q}:meta
-- KEYS[5] wake: emq:{q}:wake
-- KEYS[6] expiring: emq:{q}:expiring, a job with a deadline goes back on it
-- KEYS[7..] jobs: emq:{q}:job:<id> for each candidate, in ARGV order
-- ARGV[1..] ids: the candidate ids
-- RETURNS: {requeued, dead jobs left in the set}
-- ERRORS: EMQKEYS job keys not the ids' or not this queue's; EMQVERSION another major
--   version; nothing written
-- @include now
-- @include age
-- @include pend
-- @include fence
-- @include shape
local bad = shape({'dead', 'pending', 'lanes', 'meta', 'wake', 'expiring'}, 0, 6, 0)
if bad then return bad end
local refused = fence(KEYS[4])
if refused then return refused end
local moved = 0
for i = 1, #ARGV do
  local id, job = ARGV[i], KEYS[i + 6]
  if redis.call('ZREM', KEYS[1], id) == 1 and redis.call('EXISTS', job) == 1 then
    redis.call('HSET', job, 'state', 'pending', 'failures', '0')
    local row = redis.call('HMGET', job, 'lane', 'exp')
    pend(KEYS[2], KEYS[3], KEYS[4], KEYS[5], id, row[1], false, job)
    if row[2] then redis.call('ZADD', KEYS[6], row[2], id) end -- its deadline holds
    moved = moved + 1
  end
end
return {moved, redis.call('ZCARD', KEYS[1])}
