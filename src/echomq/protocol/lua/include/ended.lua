-- ended(job, done, id, now): end a job 'cancelled'. Its row stays without its payload in
-- the done set (score = now) for the done retention, so the id keeps refusing duplicates
-- and a waiter reads why it ended (docs/decisions/0023-results-and-cancellation.md).
local function ended(job, done, id, now)
  redis.call('HSET', job, 'state', 'cancelled')
  redis.call('HDEL', job, 'payload')
  redis.call('ZADD', done, now, id)
end
