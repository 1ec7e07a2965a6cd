-- expire(job, expired, inflight, finished, id, lane, now): end a job that never started
-- by its deadline 'expired' (docs/decisions/0045-expiry.md). The row stays, payload and all,
-- in the expired set (score = now) for the expired retention, so the id keeps refusing
-- duplicates and a waiter reads why it ended; a serial lane it holds is freed; a flow
-- child's parent gets the notice 'expired' (a failed child under its policy). The caller
-- has taken the id off pending or delayed and off the expiring index, and tells the
-- finished channel. Only a job admitted with expires_ms ever comes here.
-- @include release
-- @include flows
local function expire(job, expired, inflight, finished, id, lane, now)
  redis.call('HSET', job, 'state', 'expired')
  redis.call('ZADD', expired, now, id)
  release(inflight, lane, id)
  local parent = redis.call('HGET', job, 'parent')
  if parent then flow_told(finished, id, parent, 'expired') end
end
