-- handoff(parked, active, job, wake, id, payload): lease a new job to a parked consumer in
-- the admission's own step (docs/decisions/0018-hand-off.md). Called only when pending is
-- empty (a parked consumer saw it empty and nothing has been queued since). Picks the
-- longest-parked live registration (member '<lease_ms>|<token>', score = its expiry on the
-- server clock), removes it (one registration, one job), writes the row as claim would
-- (state active, attempts 1: the fencing token), puts the lease on active with its
-- deadline, and publishes on the wake channel 'EMQH|<token>|<id>|1|<deadline>|<payload>':
-- everything the consumer needs to start. Returns false (nothing written) when no
-- consumer is parked. A consumer that died parked gets the job like any other lease it
-- held: the lease expires and reap re-exposes it.
local function handoff(parked, active, job, wake, id, payload)
  local now = now_ms()
  redis.call('ZREMRANGEBYSCORE', parked, '-inf', '(' .. fmt(now)) -- registrations past expiry
  local pick = redis.call('ZRANGE', parked, 0, 0)[1]
  if not pick then return false end
  local lease, token = string.match(pick, '^(%d+)|(.+)$')
  redis.call('ZREM', parked, pick)
  if not lease then return false end -- not a registration park.lua wrote: dropped
  local deadline = fmt(now + tonumber(lease))
  redis.call('HSET', job, 'state', 'active', 'attempts', '1', 'payload', payload)
  redis.call('ZADD', active, deadline, id)
  redis.call('SPUBLISH', wake, 'EMQH|' .. token .. '|' .. id .. '|1|' .. deadline .. '|' .. payload)
  return true
end
